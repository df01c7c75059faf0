#!/usr/bin/python3
"""Encodes texts with python3-sentencepiece, the check for genperf's SentencePiece tokenizer.

  spm_ref.py MODEL TEXTS.json OUT.json
reads a JSON list of strings and writes {"ids": [[...]], "decoded": [...], "bos": .., "eos": ..,
"unk": .., "pad": .., "size": ..}.
"""
import json
import sys

import sentencepiece as spm


def main():
    model, texts_path, out_path = sys.argv[1:4]
    sp = spm.SentencePieceProcessor(model_file=model)
    with open(texts_path, encoding="utf-8") as f:
        texts = json.load(f)
    ids = [sp.encode(t) for t in texts]
    out = {"ids": ids, "decoded": [sp.decode(i) for i in ids], "bos": sp.bos_id(), "eos": sp.eos_id(),
           "unk": sp.unk_id(), "pad": sp.pad_id(), "size": sp.get_piece_size()}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
