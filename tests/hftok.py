#!/usr/bin/env python3
"""hftok.py - Hugging Face tokenizer.json files for the tests, and the ids
the tokenizers library (PyPI) gives, nothing of nvgkit:

  hftok.py bytelevel DIR TRAIN.txt SIZE digits|template|llama3|qwen2
      a byte-level BPE of SIZE tokens trained on TRAIN.txt: with Digits
      (individual) before ByteLevel (SmolLM2's) and the ByteLevel
      post-processor; without Digits and a template that adds
      <|im_start|> and <|im_end|>; or a Split by Llama 3's pattern
      (ignore_merges, a template adding <|im_start|>, a piece "Deutsch"
      that no merge makes) or, after an NFC normalizer, Qwen2's before a
      ByteLevel without its own pattern; special tokens and one
      non-special, normalized added token
  hftok.py llama2c DIR tok512.bin [first|always]
      llama2.c's vocabulary as Llama 2's tokenizer.json is made from a
      sentencepiece model (transformers' LlamaConverter: merges from the
      pieces, ordered by the merged piece's score; Prepend and Replace
      normalizers, or a Metaspace pre-tokenizer with that prepend_scheme;
      byte fallback; a template that adds <s>)
  hftok.py fromcmf DIR MODEL.cmf
      the tokenizer.json of the vocabulary a CMF file carries (cmf.tokenizer,
      from a GGUF): a GPT-2 one with vocab, merges, Digits when its
      pre-tokenizer is smollm, Llama 3's Split and ignore_merges for
      llama-bpe, Qwen2's Split and NFC for qwen2, <bos> first when it adds
      it; a sentencepiece one as llama2c does; control and user-defined
      tokens as special added tokens
  hftok.py encode DIR TEXT OUT.u32
      the ids of TEXT by DIR/tokenizer.json, as u32 little-endian
  hftok.py nfctext OUT.txt
      a text for NFC: every canonically decomposable code point as it is and
      decomposed, and random starters with marks of mixed classes
  hftok.py decode DIR IDS.u32 OUT.txt
      the text DIR/tokenizer.json's decoder makes of IDS.u32
  hftok.py torture OUT.txt
      a text of many scripts, emoji, runs of white space, digits and
      contractions, with added tokens in it

DIR/tokenizer_config.json is written beside tokenizer.json.
"""
import json
import os
import struct
import sys

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers, AddedToken, Regex

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")


def save(tok, d, config):
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)


def bytelevel(d, train, size, kind):
    tok = Tokenizer(models.BPE())
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if kind == "digits":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), bl])
    elif kind in ("llama3", "qwen2"):
        if kind == "qwen2":
            tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if kind == "llama3" else QWEN2), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = bl
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size - 1 - (kind == "llama3"), special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train([train], trainer)
    tok.add_tokens([AddedToken("once upon", normalized=True)])
    if kind != "template":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if kind == "llama3":
        tok.post_processor = processors.Sequence([tok.post_processor,
            processors.TemplateProcessing(single="<|im_start|> $A",
                                          special_tokens=[("<|im_start|>", 1)])])
    if kind == "template":
        tok.post_processor = processors.TemplateProcessing(
            single="<|im_start|> $A <|im_end|>",
            special_tokens=[("<|im_start|>", 1), ("<|im_end|>", 2)])
    save(tok, d, {"bos_token": "<|im_start|>", "eos_token": {"content": "<|endoftext|>"},
                  "model_max_length": 2048, "tokenizer_class": "GPT2Tokenizer"})
    if kind == "llama3":
        p = os.path.join(d, "tokenizer.json")
        j = json.load(open(p))
        # and a piece no merge makes: only ignore_merges gives it
        j["model"]["ignore_merges"] = True
        j["model"]["vocab"]["Deutsch"] = size - 2
        j["added_tokens"][-1]["id"] = size - 1
        json.dump(j, open(p, "w"))


def llama2c_pieces(path):
    b = open(path, "rb").read()
    o, out = 4, []
    while o < len(b):
        score, n = struct.unpack_from("<fi", b, o)
        out.append((b[o + 8:o + 8 + n].decode("utf-8").replace(" ", "\u2581"), score))
        o += 8 + n
    return out


def llama2c(d, path, scheme=None):
    pieces = llama2c_pieces(path)
    names = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
    spm(d, [(names[i] if i < len(names) else p, sc) for i, (p, sc) in enumerate(pieces)],
        ["<unk>", "<s>", "</s>"], scheme)


def spm(d, pieces, specials, scheme=None):
    """a sentencepiece BPE vocabulary of (piece, score), U+2581 for spaces, the
    first 259 <unk> <s> </s> and the bytes, as LlamaConverter makes it"""
    vocab = {p: i for i, (p, _) in enumerate(pieces)}
    assert len(vocab) == len(pieces)
    merges = []
    for i, (p, score) in enumerate(pieces[259:], 259):
        local = [(p[:k], p[k:], score) for k in range(1, len(p))
                 if p[:k] in vocab and p[k:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.sort(key=lambda m: m[2], reverse=True)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for a, b, _ in merges],
                               unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if scheme:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                     prepend_scheme=scheme, split=False)
    else:
        tok.normalizer = normalizers.Sequence(
            [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in specials])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    save(tok, d, {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                  "eos_token": "</s>", "unk_token": "<unk>", "legacy": True})


def fromcmf(d, path):
    from safetensors import safe_open
    with safe_open(path, "np") as f:
        t = json.loads(f.metadata()["cmf.tokenizer"])
    specials = [p for p, ty in zip(t["tokens"], t["types"]) if ty in (2, 3, 4)]
    if t["model"] == "llama":
        assert t["tokens"][:3] == ["<unk>", "<s>", "</s>"] and t["bos"] == 1
        return spm(d, list(zip(t["tokens"], t["scores"])), specials)
    assert t["model"] == "gpt2"
    vocab = {p: i for i, p in enumerate(t["tokens"])}
    assert len(vocab) == len(t["tokens"])
    split = {"llama-bpe": LLAMA3, "qwen2": QWEN2}.get(t["pre"])
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in t["merges"]],
                               ignore_merges=t["pre"] == "llama-bpe"))
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not split)
    digits = t["pre"] in ("smollm", "starcoder", "refact")
    if split:
        bl = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), "isolated"), bl])
    elif digits:
        bl = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl])
    tok.pre_tokenizer = bl
    if t["pre"] == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.add_special_tokens([AddedToken(p, normalized=False) for p in specials])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    name = lambda i: t["tokens"][i] if i >= 0 else None
    if t.get("add_bos"):
        tok.post_processor = processors.Sequence([tok.post_processor,
            processors.TemplateProcessing(single="%s $A" % name(t["bos"]),
                                          special_tokens=[(name(t["bos"]), t["bos"])])])
    tok.decoder = decoders.ByteLevel()
    save(tok, d, {"bos_token": name(t["bos"]), "eos_token": name(t["eos"]),
                  "pad_token": name(t["pad"]), "add_prefix_space": False})


def encode(d, text, out):
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    ids = tok.encode(open(text, encoding="utf-8", newline="").read()).ids
    with open(out, "wb") as f:
        f.write(struct.pack("<%dI" % len(ids), *ids))


TORTURE = (
    "Once upon a time, there was a little girl named Lily.\n"
    "  Two spaces,   three,\t\ttabs, \t mixed \n\n\n  and newlines.\r\n"
    "Trailing spaces   \n \n  \n"
    "It's, I'LL, we're, they've, I'm, you'd, don't, 'S 'll 're''ve \u2019s it'\u017fx\n"
    "Digits 0 12 345 6789 3.14159 1,000,000 2024-01-31 \u0663\u0664\u0665 \u00b2\u00bd \uff11\uff12\n"
    "Deutsch: Gr\u00f6\u00dfe, \u00dcbung, stra\u00dfe. Fran\u00e7ais: \u00e7a co\u00fbte 5\u20ac.\n"
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442. "
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac. \u4e2d\u6587\u6587\u672c\uff0c"
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002 \ud55c\uad6d\uc5b4 "
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea "
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\n"
    "Emoji: \U0001F600\U0001F602 \U0001F44D\U0001F3FD \U0001F468\u200D\U0001F469\u200D"
    "\U0001F467 \U0001F1EB\U0001F1F7 \u2764\ufe0f \u263a\n"
    "Marks: e\u0301 a\u0308 \u0301alone, zero\u200bwidth, nbsp\u00a0here, "
    "ideographic\u3000space, \u2581block\u2581 \u2581\u2581\n"
    "Symbols: <<>> <s> </s> <unk> <|endoftext|>mid<|im_start|><|im_end|> < s> <|endoftext|\n"
    "once upon a time; Once upon; once upon\n"
    "Control: \x01\x02\x7f \u0085 \u2028 \u2029 end\n"
    "Mojibake: \u00e2\u20ac\u2122 \u00e2\u20ac\u0153quoted\u00e2\u20ac\u009d\n"
    "Code: def f(x): return x**2 + 1  # comment\n\tif (a && b) { c++; }\n"
    "Long word: " + "abracadabra" * 20 + " and " + "\U0001F600" * 5 + " done.  \n"
)


def nfctext(out):
    """every code point with a canonical decomposition, as it is and decomposed
    (NFD), Hangul syllables decomposed, and 4000 starters each followed by
    marks of mixed classes in a random order (seed 1)"""
    import random
    import unicodedata
    dec = [c for c in range(0x110000) if unicodedata.decomposition(chr(c))[:1] not in ("", "<")]
    marks = [c for c in range(0x300, 0x10000) if unicodedata.combining(chr(c))]
    bases = [ord(x) for x in "aeiouAEIOUnNcCsSyYwWzZ"] + [0x391, 0x3B1, 0x3B7, 0x3C9, 0x41E, 0x928,
                                                          0x915, 0x1100, 0x1161, 0x11A8, 0xAC00]
    rnd = random.Random(1)
    parts = ["".join(chr(c) for c in dec), " ",
             " ".join(unicodedata.normalize("NFD", chr(c)) for c in dec), " ",
             " ".join(unicodedata.normalize("NFD", chr(c)) for c in range(0xAC00, 0xD7A4, 7)), "\n"]
    for _ in range(4000):
        parts.append(chr(rnd.choice(bases)) + "".join(
            chr(rnd.choice(marks + [0x301, 0x308, 0x323, 0x327, 0x93C, 0x1161, 0x11A8]))
            for _ in range(rnd.randint(0, 4))) + rnd.choice(" x\n"))
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write("".join(parts))


def decode(d, ids, out):
    """the text of IDS.u32 by DIR/tokenizer.json's decoder, written as UTF-8"""
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    b = open(ids, "rb").read()
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(tok.decode(list(struct.unpack("<%dI" % (len(b) // 4), b)),
                           skip_special_tokens=False))


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "bytelevel":
        bytelevel(a[0], a[1], int(a[2]), a[3])
    elif cmd == "llama2c":
        llama2c(a[0], a[1], a[2] if len(a) > 2 else None)
    elif cmd == "fromcmf":
        fromcmf(a[0], a[1])
    elif cmd == "encode":
        encode(a[0], a[1], a[2])
    elif cmd == "nfctext":
        nfctext(a[0])
    elif cmd == "decode":
        decode(a[0], a[1], a[2])
    elif cmd == "torture":
        with open(a[0], "w", encoding="utf-8", newline="") as f:
            f.write(TORTURE)
    else:
        sys.exit("hftok.py: unknown command '%s'" % cmd)


main()
