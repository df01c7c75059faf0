#!/usr/bin/python3
"""Builds the held-out evaluation sets of the default model from a held-out novel (Persuasion).

  evalsets.py --heldout persuasion.txt --out DIR [--seed 1]

The input has one paragraph a line (scripts/data/austen.sh). Writes
  DIR/heldout_ppl.txt   the leading paragraphs (--ppl-fraction of them, at most --ppl-max-bytes),
                        one a line: the perplexity text
  DIR/heldout_mc.jsonl  continuation tasks in the style of HellaSwag from the remaining
                        paragraphs: {"context": 1-2 consecutive sentences, "choices": [4 sentences],
                        "gold": index of the true next sentence}, the format genperf eval mc reads
The two parts do not overlap. genperf scores a choice as the continuation of context + choice,
so each choice starts with a space and the context does not end with one. Distractors are true
continuations of other paragraphs of the MC part (so they share the truth's style), of lengths that
keep any two choices within --len-ratio of each other, with the truth's length rank uniform (see
pick_distractors). Standard library only; deterministic
for a given seed.
"""
import argparse
import json
import os
import random
import re
import sys

# Words whose trailing period does not end a sentence (compared in lower case). Single capital
# initials ("J. Smith") are handled separately.
ABBREVIATIONS = {
    "mr", "mrs", "messrs", "ms", "dr", "st", "col", "capt", "gen", "lt", "rev", "hon", "esq",
    "sir", "jr", "sr", "no", "vol", "viz", "etc", "i.e", "e.g", "co", "mme", "mlle",
}
# A sentence ends at . ! or ? (possibly several, possibly followed by closing quotes or brackets),
# then whitespace, then what can begin a sentence: a capital letter, or an opening quote or bracket
# followed by one.
BOUNDARY = re.compile(r"""([.!?]+)(["')\]]*)\s+(?=["'(\[]*[A-Z])""")
HEADING = re.compile(r"^(chapter|volume|book|part)\b[\w .]*$", re.IGNORECASE)


def split_sentences(paragraph):
    """Splits one paragraph into sentences, keeping each sentence's closing punctuation and quotes."""
    out, start = [], 0
    for m in BOUNDARY.finditer(paragraph):
        end = m.end(2)
        if m.group(1) == ".":
            word = re.search(r"([\w.]+)$", paragraph[start:m.start(1)])
            w = word.group(1) if word else ""
            if w.lower() in ABBREVIATIONS or (len(w) == 1 and w.isupper() and w != "I"):
                continue  # "Mr. Elliot", "J. Smith"; but "said I. Then" ends a sentence
        elif not m.group(2) and re.search(r"(^|[\s\"'(])(oh|ah|o|alas|nay)$",
                                          paragraph[start:m.start(1)], re.IGNORECASE):
            continue  # an interjection ("Oh! Mrs Smith, ...") rarely ends a sentence
        sentence = paragraph[start:end].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


def is_heading(paragraph):
    """Chapter headings and title-page lines: no sentence punctuation or very short."""
    p = paragraph.strip()
    return bool(HEADING.match(p)) or len(p) < 20 or not re.search(r"[a-z]", p)


def usable(sentence, min_chars, max_chars):
    """A sentence worth scoring: long enough, mostly words, not a heading."""
    if not (min_chars <= len(sentence) <= max_chars) or HEADING.match(sentence):
        return False
    letters = sum(c.isalpha() for c in sentence)
    return letters >= 0.6 * len(sentence) and len(sentence.split()) >= 4


def pick_distractors(truth, others, rng, ratio):
    """Three sentences of `others` for `truth`, or None when too few fit.

    Lengths stay within sqrt(ratio) of the truth's, so any two choices are within the ratio, and
    the truth's rank by length is drawn uniformly (how many distractors are shorter), so neither
    acc (which favours short choices) nor acc_norm can gain from length alone. A truth is used only
    where every rank is possible, else the shortest truths would always rank first. Distractors
    with the truth's parity of double quotes are preferred, so an unclosed quote does not give it
    away.
    """
    n, bound = len(truth), ratio ** 0.5
    n_shorter = rng.randrange(4)
    parity = truth.count('"') % 2
    same = [t for t in others if t.count('"') % 2 == parity]
    for pool in (same, others):
        shorter = sorted({t for t in pool if n / bound <= len(t) < n})
        longer = sorted({t for t in pool if n < len(t) <= n * bound})
        if len(shorter) >= 3 and len(longer) >= 3:
            return rng.sample(shorter, n_shorter) + rng.sample(longer, 3 - n_shorter)
    return None


def build_tasks(paragraphs, rng, args):
    """Returns (tasks, number of candidate positions). paragraphs: the MC part."""
    # Every usable sentence, tagged with its paragraph.
    sentences = []  # (paragraph index, sentence index, text)
    split = []
    for pi, p in enumerate(paragraphs):
        s = split_sentences(p) if not is_heading(p) else []
        split.append(s)
        for si, t in enumerate(s):
            if usable(t, args.min_choice_chars, args.max_choice_chars):
                sentences.append((pi, si, t))
    # Candidate targets: a usable sentence preceded in its paragraph by 1 or 2 sentences that make
    # a context of the allowed length. The context length is drawn now so it is fixed by the seed.
    candidates = []
    for pi, si, t in sentences:
        if si == 0:
            continue
        k = rng.choice((1, 2)) if si >= 2 else 1
        context = " ".join(split[pi][si - k:si])
        if len(context) < args.min_context_chars and si >= 2 and k == 1:
            k = 2
            context = " ".join(split[pi][si - 2:si])
        if args.min_context_chars <= len(context) <= args.max_context_chars and not HEADING.match(context):
            candidates.append((pi, si, context, t, k))
    # Tasks are drawn in a seeded order, skipping any that shares a sentence with one already
    # drawn, so no task's answer sits in another's context; they are written in text order.
    order = list(range(len(candidates)))
    rng.shuffle(order)
    built, used = [], set()
    for ci in order:
        if len(built) == args.tasks:
            break
        pi, si, context, truth, k = candidates[ci]
        window = {(pi, j) for j in range(si - k, si + 1)}
        if window & used:
            continue
        # Distractors come from the same population as true continuations (sentences that follow
        # another in their paragraph): paragraph-opening sentences differ in style (opening quotes,
        # names), which gave the truth a cue a random model could pick up.
        others = [c[3] for c in candidates if c[0] != pi and c[3] != truth and c[3] not in context]
        distractors = pick_distractors(truth, others, rng, args.len_ratio)
        if distractors is None:
            continue
        used |= window
        choices = [truth] + distractors
        rng.shuffle(choices)
        built.append((ci, {"context": context.rstrip(), "choices": [" " + c for c in choices],
                           "gold": choices.index(truth)}))
    tasks = [t for _, t in sorted(built, key=lambda x: x[0])]
    return tasks, len(candidates)


def write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heldout", required=True, help="held-out text, one paragraph a line")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=500, help="number of MC tasks (at most)")
    ap.add_argument("--ppl-fraction", type=float, default=0.4,
                    help="leading fraction of paragraphs for perplexity")
    ap.add_argument("--ppl-max-bytes", type=int, default=150_000, help="cap on the perplexity text")
    ap.add_argument("--min-context-chars", type=int, default=60)
    ap.add_argument("--max-context-chars", type=int, default=400)
    ap.add_argument("--min-choice-chars", type=int, default=25)
    ap.add_argument("--max-choice-chars", type=int, default=300)
    ap.add_argument("--len-ratio", type=float, default=1.5, help="bound on longest/shortest choice length")
    args = ap.parse_args()

    try:
        with open(args.heldout, encoding="utf-8") as f:
            paragraphs = [" ".join(line.split()) for line in f]
    except OSError as e:
        sys.exit(f"evalsets: cannot read --heldout {args.heldout}: {e.strerror}")
    paragraphs = [p for p in paragraphs if p]
    if len(paragraphs) < 10:
        sys.exit(f"evalsets: {args.heldout} has {len(paragraphs)} paragraphs; need at least 10")

    # The perplexity part: leading paragraphs up to the fraction, cut at the byte cap.
    n_ppl, size = 0, 0
    limit = max(1, round(args.ppl_fraction * len(paragraphs)))
    while n_ppl < limit:
        b = len(paragraphs[n_ppl].encode("utf-8")) + 1
        if n_ppl > 0 and size + b > args.ppl_max_bytes:
            break
        size += b
        n_ppl += 1
    ppl_text = "".join(p + "\n" for p in paragraphs[:n_ppl])

    rng = random.Random(args.seed)
    tasks, n_candidates = build_tasks(paragraphs[n_ppl:], rng, args)
    if not tasks:
        sys.exit(f"evalsets: no continuation tasks could be built from {args.heldout}")

    os.makedirs(args.out, exist_ok=True)
    ppl_path = os.path.join(args.out, "heldout_ppl.txt")
    mc_path = os.path.join(args.out, "heldout_mc.jsonl")
    write_atomic(ppl_path, ppl_text)
    write_atomic(mc_path, "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks))
    print(f"evalsets: seed {args.seed}; {len(paragraphs)} paragraphs in {args.heldout}")
    print(f"evalsets: {ppl_path}: {n_ppl} paragraphs, {len(ppl_text.encode('utf-8'))} bytes")
    print(f"evalsets: {mc_path}: {len(tasks)} tasks from {len(paragraphs) - n_ppl} paragraphs "
          f"({n_candidates} candidate positions)")


if __name__ == "__main__":
    main()
