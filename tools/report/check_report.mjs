// Opens a report of `genperf report` in headless chromium (Debian's, driven by puppeteer-core) and
// checks what a reader would see: every chart rendered with data marks (bars, points, lines), no
// console message of level error, no page error, no request leaving the page (it must work
// offline). Keeps a screenshot of the whole page. Prints one JSON object; exits 1 when a check fails.
//   node check_report.mjs REPORT.html SCREENSHOT.png [CHARTS]   (CHARTS: how many charts to expect)
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const [html, screenshot, expected] = process.argv.slice(2);
if (!html || !screenshot) {
  console.error("usage: node check_report.mjs REPORT.html SCREENSHOT.png [CHARTS]");
  process.exit(2);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  // CI runs as root, where chromium's sandbox cannot start.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const errors = [];
const requests = [];
let result;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("request", (r) => {
    if (!/^(file|data|about|blob):/.test(r.url())) requests.push(r.url());
  });
  page.on("requestfailed", (r) => errors.push(`request failed: ${r.url()}`));
  await page.goto(pathToFileURL(resolve(html)).href, { waitUntil: "load", timeout: 60000 });

  // Waits for every vega-embed call to finish, then counts each chart's marks in its SVG: Vega
  // gives the marks of a spec the class role-mark (axes, legends and titles have other roles).
  const charts = await page.evaluate(async () => {
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("charts not rendered in 30 s")), 30000));
    await Promise.race([window.genperfReport, timeout]);
    return [...document.querySelectorAll("div.chart")].map((div) => {
      const count = (sel) => div.querySelectorAll(sel).length;
      const svg = div.querySelector("svg");
      return {
        id: div.id,
        svg: !!svg && svg.getBoundingClientRect().width > 0,
        bars: count(".mark-rect.role-mark > path"),
        points: count(".mark-symbol.role-mark > path"),
        lines: count(".mark-line.role-mark > path"),
        whiskers: count(".mark-rule.role-mark > line"),
        labels: count(".mark-text.role-mark > text"),
      };
    });
  });
  await page.screenshot({ path: screenshot, fullPage: true });
  const failures = [...errors];
  for (const c of charts) {
    if (!c.svg) failures.push(`${c.id}: no SVG drawn`);
    if (c.bars + c.points + c.lines === 0) failures.push(`${c.id}: no data marks`);
    if (c.whiskers === 0) failures.push(`${c.id}: no min-max whiskers`);
  }
  if (charts.length === 0) failures.push("no charts on the page");
  if (expected !== undefined && charts.length !== Number(expected))
    failures.push(`${charts.length} charts on the page, expected ${expected}`);
  for (const u of requests) failures.push(`network request: ${u}`);
  result = { html, screenshot: resolve(screenshot), charts, errors, requests, failures };
} finally {
  await browser.close();
}
console.log(JSON.stringify(result, null, 1));
process.exit(result.failures.length ? 1 : 0);
