#!/usr/bin/python3
"""Independent reference for genperf's byte-level BPE tokenizer (standard library only).

Written from the algorithm descriptions, not from genperf's code:
  * the pre-tokenizer regexes of GPT-2, Llama 3 and Qwen2 are matched by hand, alternative by
    alternative, with PCRE's backtracking worked out per alternative, because Python's re has no
    \\p{L} / \\p{N};
  * classes follow PCRE2 with PCRE2_UCP: \\p{L} and \\p{N} are the Unicode general categories L* and
    N*, \\s is the Z* categories plus \\t \\n \\v \\f \\r, U+0085 and U+180E;
  * BPE is GPT-2's: repeatedly merge every occurrence of the adjacent pair with the lowest rank.

  bpe_ref.py train --pattern llama3|qwen2|gpt2 --merges N --corpus FILE --out DIR
      trains N merges on the corpus (one text per line) and writes DIR/tokenizer.json (Hugging Face
      format) and DIR/tokenizer_config.json.
  bpe_ref.py encode --pattern NAME --tokenizer DIR/tokenizer.json --input TEXTS.json --output IDS.json
      encodes a JSON list of strings; writes {"ids": [[...], ...], "all_nfc": bool}.
"""
import argparse
import heapq
import json
import sys
import unicodedata
from collections import Counter, defaultdict

PATTERNS = {
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}

SPECIALS = {
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "gpt2": ["<|endoftext|>"],
}
PLAIN_ADDED = "<genperf_note>"  # an added token with special: false (kept by decode)

# --------------------------------------------------------------------------------------------
# Character classes

_cat_cache = {}


def category(c):
    k = _cat_cache.get(c)
    if k is None:
        k = _cat_cache[c] = unicodedata.category(c)
    return k


def is_letter(c):
    return category(c)[0] == "L"


def is_number(c):
    return category(c)[0] == "N"


def is_space(c):
    return c in "\t\n\x0b\x0c\r\x85\u180e" or category(c) in ("Zs", "Zl", "Zp")


def is_other(c):  # [^\s\p{L}\p{N}]
    return not (is_space(c) or is_letter(c) or is_number(c))


# --------------------------------------------------------------------------------------------
# Pre-tokenizer: each function matches one alternative at t[i] and returns its end, or -1.


def run(t, j, pred):
    while j < len(t) and pred(t[j]):
        j += 1
    return j


def contraction(t, i, caseless):
    if t[i] != "'":
        return -1
    for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
        seg = t[i + 1:i + 1 + len(suffix)]
        if len(seg) != len(suffix):
            continue
        if caseless:
            # PCRE2's caseless UCP matching also takes U+017F (long s) for s.
            ok = all(c.lower() == x or (x == "s" and c == "\u017f") for c, x in zip(seg, suffix))
        else:
            ok = seg == suffix
        if ok:
            return i + 1 + len(suffix)
    return -1


def opt_space_then(t, i, pred):  # " ?X+"
    if pred(t[i]):
        return run(t, i, pred)
    if t[i] == " " and i + 1 < len(t) and pred(t[i + 1]):
        return run(t, i + 1, pred)
    return -1


def letters_llama(t, i):  # [^\r\n\p{L}\p{N}]?\p{L}+
    if is_letter(t[i]):
        return run(t, i, is_letter)
    c = t[i]
    if c not in "\r\n" and not is_number(c) and i + 1 < len(t) and is_letter(t[i + 1]):
        return run(t, i + 1, is_letter)
    return -1


def numbers_upto(t, i, most):  # \p{N}{1,most}
    j = i
    while j < len(t) and j - i < most and is_number(t[j]):
        j += 1
    return j if j > i else -1


def punct_llama(t, i):  # " ?[^\s\p{L}\p{N}]+[\r\n]*"
    j = opt_space_then(t, i, is_other)
    return -1 if j < 0 else run(t, j, lambda c: c in "\r\n")


def newlines(t, i):  # \s*[\r\n]+ : ends just after the last \r or \n of the whitespace run
    k = run(t, i, is_space)
    last = -1
    for p in range(i, k):
        if t[p] in "\r\n":
            last = p
    return -1 if last < 0 else last + 1


def spaces_not_before_text(t, i):  # \s+(?!\S)
    if not is_space(t[i]):
        return -1
    k = run(t, i, is_space)
    if k == len(t):
        return k
    return k - 1 if k - 1 > i else -1


def spaces(t, i):  # \s+
    return run(t, i, is_space) if is_space(t[i]) else -1


def alternatives(name):
    if name == "gpt2":
        return [
            lambda t, i: contraction(t, i, False),
            lambda t, i: opt_space_then(t, i, is_letter),
            lambda t, i: opt_space_then(t, i, is_number),
            lambda t, i: opt_space_then(t, i, is_other),
            spaces_not_before_text,
            spaces,
        ]
    most = 3 if name == "llama3" else 1
    return [
        lambda t, i: contraction(t, i, True),
        letters_llama,
        lambda t, i: numbers_upto(t, i, most),
        punct_llama,
        newlines,
        spaces_not_before_text,
        spaces,
    ]


def pre_tokenize(text, alts):
    """Split behavior "Isolated": matches and the gaps between them are pieces."""
    pieces, i, gap = [], 0, 0
    while i < len(text):
        for alt in alts:
            end = alt(text, i)
            if end > i:
                break
        else:
            i += 1
            continue
        if i > gap:
            pieces.append(text[gap:i])
        pieces.append(text[i:end])
        i = gap = end
    if gap < len(text):
        pieces.append(text[gap:])
    return pieces


# --------------------------------------------------------------------------------------------
# Byte-level alphabet (GPT-2's bytes_to_unicode)


def byte_alphabet():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


BYTE_CHAR = byte_alphabet()


def to_byte_level(s):
    return "".join(BYTE_CHAR[b] for b in s.encode("utf-8"))


def split_added(text, added):
    """Leftmost-longest matches of added tokens; yields (segment, is_added)."""
    out, start, i = [], 0, 0
    by_len = sorted(added, key=len, reverse=True)
    while i < len(text):
        hit = next((a for a in by_len if text.startswith(a, i)), None)
        if hit is None:
            i += 1
            continue
        if i > start:
            out.append((text[start:i], False))
        out.append((hit, True))
        i += len(hit)
        start = i
    if start < len(text):
        out.append((text[start:], False))
    return out


# --------------------------------------------------------------------------------------------
# Training


def train(args):
    alts = alternatives(args.pattern)
    words = Counter()
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            for piece in pre_tokenize(line.rstrip("\n"), alts):
                words[to_byte_level(piece)] += 1
    syms = [list(w) for w in words]
    counts = [words[w] for w in words]
    pair_count = Counter()
    where = defaultdict(set)
    for wi, s in enumerate(syms):
        for p in zip(s, s[1:]):
            pair_count[p] += counts[wi]
            where[p].add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < args.merges and heap:
        neg, best = heapq.heappop(heap)
        if pair_count.get(best, 0) != -neg:
            continue  # stale entry
        if -neg < 2:
            break
        merges.append(best)
        changed = set()
        for wi in list(where[best]):
            s = syms[wi]
            for p in zip(s, s[1:]):
                pair_count[p] -= counts[wi]
                where[p].discard(wi)
                changed.add(p)
            syms[wi] = s = merge_all(s, best)
            for p in zip(s, s[1:]):
                pair_count[p] += counts[wi]
                where[p].add(wi)
                changed.add(p)
        for p in changed:
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], p))
            else:
                pair_count.pop(p, None)
    write_tokenizer(args, merges, whole_words(args, merges, words))


def whole_words(args, merges, words, count=40):
    """Llama 3's vocabulary holds whole words that its merges do not build, which is why its
    tokenizer.json says ignore_merges: true. Mimic that with frequent words BPE splits."""
    if args.pattern != "llama3":
        return []
    ranks = {m: r for r, m in enumerate(merges)}
    out = []
    for word, _ in words.most_common():
        if len(out) == count:
            break
        if len(bpe_merge(list(word), ranks)) > 1:
            out.append(word)
    return out


def bpe_merge(s, ranks):
    """GPT-2's BPE: merge every occurrence of the lowest-ranked adjacent pair until none has a rank."""
    while len(s) > 1:
        best = min(set(zip(s, s[1:])), key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        s = merge_all(s, best)
    return s


def merge_all(s, pair):
    out, i = [], 0
    while i < len(s):
        if i + 1 < len(s) and s[i] == pair[0] and s[i + 1] == pair[1]:
            out.append(s[i] + s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return out


def write_tokenizer(args, merges, extra_words):
    vocab = {BYTE_CHAR[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    for w in extra_words:
        vocab.setdefault(w, len(vocab))
    added = []
    for content in SPECIALS[args.pattern] + [PLAIN_ADDED]:
        added.append({"id": len(vocab) + len(added), "content": content, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": content == PLAIN_ADDED, "special": content != PLAIN_ADDED})
    split = {"type": "Split", "pattern": {"Regex": PATTERNS[args.pattern]}, "behavior": "Isolated", "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if args.pattern == "gpt2":
        pre = dict(byte_level, use_regex=True)
    else:
        pre = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    # Llama 3 writes merges as "a b" and adds BOS through TemplateProcessing; Qwen2's newer files
    # write [a, b] pairs, normalize to NFC and add no BOS.
    if args.pattern == "qwen2":
        merge_list = [[a, b] for a, b in merges]
    else:
        merge_list = [a + " " + b for a, b in merges]
    post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    config = {"bos_token": None, "eos_token": SPECIALS[args.pattern][0], "add_prefix_space": False}
    if args.pattern == "llama3":
        bos = added[0]
        post = {"type": "Sequence", "processors": [post, {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos["content"], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos["content"], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos["content"], "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos["content"]: {"id": bos["content"], "ids": [bos["id"]], "tokens": [bos["content"]]}}}]}
        config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "clean_up_tokenization_spaces": True}
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"} if args.pattern == "qwen2" else None,
        "pre_tokenizer": pre, "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": args.pattern == "llama3", "vocab": vocab, "merges": merge_list},
    }
    with open(f"{args.out}/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    with open(f"{args.out}/tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)


# --------------------------------------------------------------------------------------------
# Encoding


class Encoder:
    def __init__(self, doc, pattern):
        model = doc["model"]
        self.vocab = model["vocab"]
        self.ignore_merges = bool(model.get("ignore_merges"))
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.added = {t["content"]: t["id"] for t in doc["added_tokens"]}
        self.alts = alternatives(pattern)
        self.nfc = doc.get("normalizer") == {"type": "NFC"}
        self.cache = {}

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        return [self.vocab[x] for x in bpe_merge(list(word), self.ranks)]

    def encode(self, text):
        ids = []
        for seg, is_added in split_added(text, self.added):
            if is_added:
                ids.append(self.added[seg])
                continue
            if self.nfc:
                seg = unicodedata.normalize("NFC", seg)
            for piece in pre_tokenize(seg, self.alts):
                word = to_byte_level(piece)
                if word not in self.cache:
                    self.cache[word] = self.bpe(word)
                ids.extend(self.cache[word])
        return ids


def encode(args):
    with open(args.tokenizer, encoding="utf-8") as f:
        doc = json.load(f)
    pre = doc["pre_tokenizer"]
    if pre["type"] == "Sequence":
        assert pre["pretokenizers"][0]["pattern"]["Regex"] == PATTERNS[args.pattern], "pattern mismatch"
    enc = Encoder(doc, args.pattern)
    with open(args.input, encoding="utf-8") as f:
        texts = json.load(f)
    out = {"ids": [enc.encode(t) for t in texts],
           "all_nfc": all(unicodedata.is_normalized("NFC", t) for t in texts)}
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(out, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--pattern", choices=sorted(PATTERNS), required=True)
    t.add_argument("--merges", type=int, default=500)
    t.add_argument("--corpus", required=True)
    t.add_argument("--out", required=True)
    e = sub.add_parser("encode")
    e.add_argument("--pattern", choices=sorted(PATTERNS), required=True)
    e.add_argument("--tokenizer", required=True)
    e.add_argument("--input", required=True)
    e.add_argument("--output", required=True)
    args = ap.parse_args()
    train(args) if args.cmd == "train" else encode(args)


if __name__ == "__main__":
    sys.exit(main())
