#!/usr/bin/env python3
"""Build step: a text file as a C string constant, so the kgym binary
carries the same file the Python package ships (the prompt template).

    embed.py INPUT OUTPUT NAME   ->  OUTPUT: static const char NAME [] = "...";
"""
import sys


def main(src, dst, name):
    with open(src, "rb") as f:
        data = f.read()
    out = ["/*  Generated from %s by client/embed.py: do not edit.  */" % src.rsplit("/", 1)[-1],
           "static const char %s [] =" % name]
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        esc = "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\?' else "\\%03o" % b for b in line)
        out.append('    "%s%s"' % (esc, "\\n" if i < len(lines) - 1 else ""))
    out.append("    ;")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
