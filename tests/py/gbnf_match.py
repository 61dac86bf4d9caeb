"""A small, independent GBNF reader, matcher and sampler for the tests.

Written from the GBNF format's description (llama.cpp's grammars/README.md: rules `name ::= expr`,
alternation `|`, grouping `( )`, repetition `* + ? {m} {m,} {m,n}`, "literals", [classes] with
ranges and `^` negation, escapes \\n \\r \\t \\\\ \\" \\xHH \\uHHHH \\UHHHHHHHH, `#` comments), not from
llmk's C parser, so the two can disagree. Texts are matched as sequences of code points, as GBNF
defines them.

    g = Grammar(text)
    g.matches("...")        # the whole text is a string of the grammar (start rule "root")
    g.sample(random.Random(0))  # a random string of the grammar (None if it grew too deep)
"""
import sys

_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^", "/": "/"}


class GrammarError(ValueError):
    pass


class Grammar:
    def __init__(self, text, start="root"):
        self.src = text
        self.i = 0
        self.rules = {}
        self._parse()
        for name in list(self._refs):
            if name not in self.rules:
                raise GrammarError("undefined rule " + name)
        if start not in self.rules:
            raise GrammarError("no rule " + start)
        self.start = start

    # ---- parsing -------------------------------------------------------------------------
    def _ws(self, newlines):
        s = self.src
        while self.i < len(s):
            c = s[self.i]
            if c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            else:
                break

    def _name(self):
        j = self.i
        while self.i < len(self.src) and (self.src[self.i].isascii() and (self.src[self.i].isalnum() or self.src[self.i] == "-")):
            self.i += 1
        if j == self.i:
            raise GrammarError("expected a name at %d: %r" % (j, self.src[j:j + 20]))
        return self.src[j:self.i]

    def _char(self):
        s = self.src
        c = s[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = s[self.i + 1]
        if e in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[e]
            h = s[self.i + 2:self.i + 2 + n]
            if len(h) != n:
                raise GrammarError("short escape")
            self.i += 2 + n
            return chr(int(h, 16))
        if e not in _ESC:
            raise GrammarError("unknown escape \\" + e)
        self.i += 2
        return _ESC[e]

    def _parse(self):
        self._refs = set()
        while True:
            self._ws(True)
            if self.i >= len(self.src):
                break
            name = self._name()
            self._ws(False)
            if not self.src.startswith("::=", self.i):
                raise GrammarError("expected ::= after " + name)
            self.i += 3
            if name in self.rules:
                raise GrammarError("rule defined twice: " + name)
            self.rules[name] = self._alt(nested=False)

    def _alt(self, nested):
        alts = [self._seq(nested)]
        while self.i < len(self.src) and self.src[self.i] == "|":
            self.i += 1
            alts.append(self._seq(nested))
        return ("alt", alts)

    def _seq(self, nested):
        items = []
        s = self.src
        while True:
            self._ws(nested)
            if self.i >= len(s) or s[self.i] in "|)\n\r":
                return ("seq", items)
            c = s[self.i]
            if c == '"':
                self.i += 1
                lit = []
                while s[self.i] != '"':
                    lit.append(self._char())
                self.i += 1
                item = ("lit", "".join(lit))
            elif c == "[":
                self.i += 1
                neg = s[self.i] == "^"
                if neg:
                    self.i += 1
                ranges = []
                while s[self.i] != "]":
                    lo = self._char()
                    hi = lo
                    if s[self.i] == "-" and s[self.i + 1] != "]":
                        self.i += 1
                        hi = self._char()
                    ranges.append((lo, hi))
                self.i += 1
                item = ("cls", neg, tuple(ranges))
            elif c == "(":
                self.i += 1
                item = self._alt(nested=True)
                self._ws(True)
                if s[self.i] != ")":
                    raise GrammarError("expected ) at %d" % self.i)
                self.i += 1
            elif c == ".":
                self.i += 1
                item = ("cls", True, ())
            else:
                n = self._name()
                self._refs.add(n)
                item = ("ref", n)
            items.append(self._suffix(item))

    def _suffix(self, item):
        s = self.src
        while self.i < len(s) and s[self.i] in "*+?{":
            c = s[self.i]
            self.i += 1
            if c == "*":
                item = ("rep", item, 0, None)
            elif c == "+":
                item = ("rep", item, 1, None)
            elif c == "?":
                item = ("rep", item, 0, 1)
            else:
                j = s.index("}", self.i)
                body = s[self.i:j].replace(" ", "")
                self.i = j + 1
                if "," in body:
                    lo, hi = body.split(",")
                    item = ("rep", item, int(lo), int(hi) if hi else None)
                else:
                    item = ("rep", item, int(body), int(body))
        return item

    # ---- matching --------------------------------------------------------------------------
    @staticmethod
    def in_class(node, ch):
        _, neg, ranges = node
        hit = any(lo <= ch <= hi for lo, hi in ranges)
        return hit != neg

    def matches(self, text):
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))
        try:
            self._text = text
            self._memo = {}
            return len(text) in self._ends(("ref", self.start), 0)
        finally:
            sys.setrecursionlimit(old)

    def _ends(self, node, i):
        """The set of positions where a match of node starting at i can end."""
        kind = node[0]
        t = self._text
        if kind == "lit":
            return {i + len(node[1])} if t.startswith(node[1], i) else set()
        if kind == "cls":
            return {i + 1} if i < len(t) and self.in_class(node, t[i]) else set()
        if kind == "ref":
            key = (node[1], i)
            if key in self._memo:
                r = self._memo[key]
                if r is None:
                    raise GrammarError("left recursion through " + node[1])
                return r
            self._memo[key] = None
            r = self._ends(self.rules[node[1]], i)
            self._memo[key] = r
            return r
        if kind == "alt":
            out = set()
            for a in node[1]:
                out |= self._ends(a, i)
            return out
        if kind == "seq":
            pos = {i}
            for item in node[1]:
                nxt = set()
                for p in pos:
                    nxt |= self._ends(item, p)
                pos = nxt
                if not pos:
                    break
            return pos
        if kind == "rep":
            _, sub, lo, hi = node
            out = {i} if lo == 0 else set()
            pos, seen, k = {i}, {i}, 0
            while pos and (hi is None or k < hi):
                nxt = set()
                for p in pos:
                    nxt |= self._ends(sub, p)
                k += 1
                if k >= lo:
                    out |= nxt
                if hi is None:  # unbounded: only positions not reached before can lead further
                    nxt -= seen
                    seen |= nxt
                pos = nxt
            return out
        raise AssertionError(kind)

    # ---- sampling ----------------------------------------------------------------------------
    # Characters a negated class may produce: ASCII, accents, CJK, an emoji, and a few that
    # JSON must escape (the class decides which are allowed).
    POOL = list("abcxyzABZ019 _-.:,/'{}[]") + ["é", "ß", "中", "\U0001F600", '"', "\\", "\n", "\x01"]

    def sample(self, rng, max_depth=60, max_len=4000):
        self._rng, self._depth_left, self._max_len = rng, max_depth, max_len
        try:
            out = []
            self._gen(("ref", self.start), out, 0)
            return "".join(out)
        except _TooDeep:
            return None

    def _gen(self, node, out, depth):
        if depth > self._depth_left or len(out) > self._max_len:
            raise _TooDeep()
        rng = self._rng
        kind = node[0]
        if kind == "lit":
            out.append(node[1])
        elif kind == "cls":
            _, neg, ranges = node
            if neg:
                choices = [c for c in self.POOL if self.in_class(node, c)]
            else:
                lo, hi = ranges[rng.randrange(len(ranges))]
                choices = [chr(rng.randint(ord(lo), ord(hi)))]
            out.append(rng.choice(choices))
        elif kind == "ref":
            self._gen(self.rules[node[1]], out, depth + 1)
        elif kind == "alt":
            # deeper down, prefer the alternatives listed last (base cases: null, scalars)
            alts = node[1]
            k = rng.randrange(len(alts)) if depth < self._depth_left // 2 else len(alts) - 1 - rng.randrange(min(2, len(alts)))
            self._gen(alts[k], out, depth + 1)
        elif kind == "seq":
            for item in node[1]:
                self._gen(item, out, depth + 1)
        elif kind == "rep":
            _, sub, lo, hi = node
            top = hi if hi is not None else lo + 3
            n = rng.randint(lo, min(top, lo + 4)) if rng.random() < 0.8 else rng.randint(lo, top)
            for _ in range(n):
                self._gen(sub, out, depth + 1)


class _TooDeep(Exception):
    pass
