#!/usr/bin/env python3
"""vocabcases.py - llama.cpp's tokenizer test cases (ggml-vocab-*.gguf.inp:
texts separated by a line "__ggml_vocab_test__"; .out: the ids Hugging
Face's tokenizers gave each, one line per text, no special tokens):

  vocabcases.py lib DIR INP OUT
      DIR/tokenizer.json by the tokenizers library gives OUT's ids
  vocabcases.py tool CMF-EVAL MODEL.cmf INP OUT PREFIX
      cmf-eval --text CASE --tokenize of MODEL gives, for each text, PREFIX
      (ids, comma-separated, or "-" for none: the bos the tokenizer adds)
      and then OUT's ids

Each names the texts whose ids differ and exits 1 when any does.
"""
import os
import struct
import subprocess
import sys


def cases(inp, out):
    texts = open(inp, encoding="utf-8", newline="").read().split("\n__ggml_vocab_test__\n")
    if texts[-1] == "":
        texts.pop()
    ids = open(out, encoding="utf-8").read().split("\n")[:len(texts)]
    assert len(ids) == len(texts) > 40, (inp, len(texts), len(ids))
    return [(t, [int(x) for x in i.split()]) for t, i in zip(texts, ids)]


def tool_ids(ev, model, text):
    with open("case.txt", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    r = subprocess.run([ev, "-m", model, "--text", "case.txt", "--tokenize", "case.u32"],
                       capture_output=True, text=True)
    if r.returncode:
        return r.stderr.strip()
    b = open("case.u32", "rb").read()
    return list(struct.unpack("<%dI" % (len(b) // 4), b))


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "lib":
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(a[0], "tokenizer.json"))
        ids = lambda t: tok.encode(t, add_special_tokens=False).ids
        pre, cs = [], cases(a[1], a[2])
    elif cmd == "tool":
        ids = lambda t: tool_ids(a[0], a[1], t)
        pre, cs = [] if a[4] == "-" else [int(x) for x in a[4].split(",")], cases(a[2], a[3])
    else:
        sys.exit("vocabcases.py: unknown command '%s'" % cmd)
    bad = 0
    for i, (text, want) in enumerate(cs):
        got = ids(text)
        if got != pre + want:
            print("text %d %r: %s, want %s" % (i, text[:40], got, pre + want))
            bad += 1
    print("%d of %d texts differ" % (bad, len(cs)))
    sys.exit(bad > 0)


main()
