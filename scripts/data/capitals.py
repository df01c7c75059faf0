#!/usr/bin/python3
"""Builds the country -> capital fine-tuning set and its multiple-choice evaluation.

  capitals.py --out DIR [--seed 1]        (install the sources first: bash scripts/deps.sh data)

Ground truth comes from two independent Debian packages: kgeography-data (world.kgm, XML, one
<division> a country) and miscfiles (/usr/share/misc/countries.gz, "UN:ISO2:ISO3:name:capital").
A pair is kept only where both agree after normalizing case, accents, punctuation, a trailing
"City" and two transliterations; countries with several capitals in either source (Bolivia, the
Netherlands, ...) are dropped as ambiguous. Writes
  DIR/capitals_train.jsonl  {"prompt", "response"} a line, each country in the 4 TRAIN_TEMPLATES,
                            shuffled with the seed
  DIR/capitals_mc.jsonl     {"context", "choices", "gold"} (genperf eval mc), each country in the 2
                            EVAL_TEMPLATES, which training never shows; 3 distractor capitals drawn
                            with the seed, from the same continent where it has enough
  DIR/capitals_pairs.tsv    the pairs kept: country, capital, miscfiles' spelling, continent
Responses and choices start with a space (genperf scores context + choice as one text).
Standard library only; deterministic for a given seed.
"""
import argparse
import gzip
import json
import os
import random
import re
import sys
import unicodedata
import xml.etree.ElementTree as ET

KGM_DIR = "/usr/share/kgeography"
COUNTRIES = "/usr/share/misc/countries.gz"
CONTINENTS = ("africa", "asia", "europe", "ncamerica", "southamerica", "oceania")

# kgeography's country names -> miscfiles' (older, ISO 3166 style) names, where they differ by more
# than a leading "The" or a parenthesis.
COUNTRY_ALIASES = {
    "brunei": "brunei darussalam", "czechia": "czech republic", "east timor": "timor leste",
    "eswatini": "swaziland", "laos": "lao peoples democratic republic",
    "libya": "libyan arab jamahiriya", "moldova": "republic of moldova",
    "north macedonia": "former yugoslav republic of macedonia",
    "republic of china": "taiwan province of china", "republic of the congo": "congo",
    "russia": "russian federation", "syria": "syrian arab republic",
    "tanzania": "united republic of tanzania",
    "united kingdom": "united kingdom of great britain and northern ireland",
    "vatican city": "holy see", "vietnam": "viet nam",
}
# Transliterations of one city's name (after normalize()).
CAPITAL_VARIANTS = {"pyeongyang": "pyongyang", "kiev": "kyiv"}
# The written capital is kgeography's, except these, where miscfiles' is the usual English one.
SPELLING = {"Pyeongyang": "Pyongyang", "Abu Dhabi City": "Abu Dhabi"}
# Continents of the countries the continent maps name differently (used to pick distractors).
CONTINENT_FALLBACK = {
    "Cyprus": "asia", "Democratic People's Republic of Korea": "asia", "Greenland (Denmark)": "ncamerica",
    "Republic of China (Taiwan)": "asia", "Republic of Korea": "asia", "The Gambia": "africa",
}
# How a country is named in a sentence, where kgeography's name carries a note.
DISPLAY = {"Republic of China (Taiwan)": "Taiwan", "Greenland (Denmark)": "Greenland",
           "Democratic People's Republic of Korea": "North Korea", "Republic of Korea": "South Korea"}
# Names that take "the" ("the United Kingdom", "the Central African Republic").
NEEDS_THE = re.compile(r"\b(Republic|Islands|Kingdom|States|Emirates)\b")

# {c}: the country inside a sentence ("the Gambia"); {C}: at its start ("The Gambia").
TRAIN_TEMPLATES = (
    "Q: What is the capital of {c}?\nA:",
    "The capital city of {c} is",
    "Which city is the capital of {c}? It is",
    "Country: {C}\nCapital:",
)
EVAL_TEMPLATES = (
    "If you travel to the capital of {c}, you arrive in",
    "Among all the cities of {c}, the one that is its capital is",
)


def normalize(s):
    """Lower case, accents dropped, punctuation to spaces, apostrophes and periods removed."""
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = re.sub(r"['\u2019.]", "", s)
    s = re.sub(r"[^a-z0-9]+", " ", s)
    return " ".join(s.split())


def country_key(name):
    k = normalize(re.sub(r"\(.*?\)", "", name))
    k = re.sub(r"^the ", "", k)
    return COUNTRY_ALIASES.get(k, k)


def capital_key(name):
    k = re.sub(r" city$", "", normalize(name))
    return CAPITAL_VARIANTS.get(k, k)


def need(path):
    if not os.path.exists(path):
        sys.exit(f"capitals: {path} is missing; install the sources with: bash scripts/deps.sh data "
                 f"(packages kgeography-data and miscfiles)")


def read_kgm(path):
    """{country: capital} of the divisions a .kgm map does not mark <ignore>yes</ignore>."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        sys.exit(f"capitals: {path} is not valid XML: {e}")
    out = {}
    for d in root.iter("division"):
        name = (d.findtext("name") or "").strip()
        if not name or (d.findtext("ignore") or "").strip().lower() == "yes":
            continue
        out[name] = (d.findtext("capital") or "").strip()
    return out


def read_miscfiles(path):
    """{country key: (name, capital)} from countries.gz."""
    out = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            parts = line.split(":")
            if len(parts) != 5:
                sys.exit(f"capitals: {path}:{no}: expected 5 ':'-separated fields, got {len(parts)}")
            out[country_key(parts[3])] = (parts[3], parts[4].strip())
    return out


def in_sentence(country, start):
    name = DISPLAY.get(country, re.sub(r"\s*\(.*?\)", "", country))
    if NEEDS_THE.search(name) and not name.startswith("The "):
        name = "The " + name
    if name.startswith("The ") and not start:
        name = "the " + name[4:]
    return name


def answer(capital):
    """The text a prompt continues with: a space, the capital, a full stop (once: "Washington D.C.")."""
    return " " + capital + ("" if capital.endswith(".") else ".")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kgm-dir", default=KGM_DIR, help="kgeography's map directory")
    ap.add_argument("--countries", default=COUNTRIES, help="miscfiles' countries.gz")
    args = ap.parse_args()

    world_path = os.path.join(args.kgm_dir, "world.kgm")
    need(world_path)
    need(args.countries)
    world = {k: v for k, v in read_kgm(world_path).items() if v}
    misc = read_miscfiles(args.countries)
    continent = {}
    for c in CONTINENTS:
        path = os.path.join(args.kgm_dir, c + ".kgm")
        if os.path.exists(path):
            for name in read_kgm(path):
                continent.setdefault(name, c)

    kept, disagree, ambiguous, missing = [], [], [], []
    for country, capital in sorted(world.items()):
        entry = misc.get(country_key(country))
        if entry is None or not entry[1]:
            missing.append(country)
        elif re.search(r",| and ", capital) or "(" in entry[1]:
            ambiguous.append(f"{country}: {capital} / {entry[1]}")
        elif capital_key(capital) != capital_key(entry[1]):
            disagree.append(f"{country}: {capital} / {entry[1]}")
        else:
            cont = continent.get(country) or CONTINENT_FALLBACK.get(country, "")
            kept.append((country, SPELLING.get(capital, capital), entry[1], cont))
    if len(kept) < 4:
        sys.exit(f"capitals: only {len(kept)} countries agree between the two sources")

    rng = random.Random(args.seed)
    train = []
    for country, capital, _, _ in kept:
        for t in TRAIN_TEMPLATES:
            train.append({"prompt": t.format(c=in_sentence(country, False), C=in_sentence(country, True)),
                          "response": answer(capital)})
    rng.shuffle(train)

    mc = []
    for country, capital, _, cont in kept:
        others = sorted({k[1] for k in kept if capital_key(k[1]) != capital_key(capital)})
        near = sorted({k[1] for k in kept if k[3] == cont and cont and k[1] in others})
        pool = near if len(near) >= 3 else others
        for t in EVAL_TEMPLATES:
            choices = [capital] + rng.sample(pool, 3)
            rng.shuffle(choices)
            mc.append({"context": t.format(c=in_sentence(country, False), C=in_sentence(country, True)),
                       "choices": [answer(c) for c in choices], "gold": choices.index(capital)})

    os.makedirs(args.out, exist_ok=True)
    outputs = {
        "capitals_train.jsonl": "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in train),
        "capitals_mc.jsonl": "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in mc),
        "capitals_pairs.tsv": "country\tcapital\tmiscfiles_capital\tcontinent\n"
                              + "".join("\t".join(k) + "\n" for k in kept),
    }
    for name, text in outputs.items():
        path = os.path.join(args.out, name)
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)

    print(f"capitals: seed {args.seed}; {len(world)} countries with a capital in {world_path}, "
          f"{len(misc)} entries in {args.countries}")
    print(f"capitals: {len(kept)} agree (kept), {len(disagree)} disagree, {len(ambiguous)} ambiguous "
          f"(several capitals), {len(missing)} missing from miscfiles")
    for label, items in (("disagree", disagree), ("ambiguous", ambiguous), ("missing", missing)):
        if items:
            print(f"capitals: {label}: " + "; ".join(items))
    print(f"capitals: {args.out}: {len(train)} training lines, {len(mc)} MC tasks")


if __name__ == "__main__":
    main()
