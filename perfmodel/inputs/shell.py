"""A launch script read the way bash reads it, as far as launch scripts go (bash(1): QUOTING,
PARAMETERS, EXPANSION; the GNU Bash manual, sections 3.1-3.5): words and quotes, comments,
backslash-newline continuations, commands separated by newlines, ``;``, ``&&``, ``||`` and ``|``,
assignments in the order they run (``NAME=value``, ``export NAME=value``, arrays ``NAME=( ... )``),
``$NAME``, ``${NAME}``, ``${NAME:-default}``, ``${NAME[@]}`` and ``$(( arithmetic ))``, and the
field splitting of unquoted expansions. One pass over the text, so a long word costs its length.

What a launch script does that this cannot know (command substitution ``$(...)``, functions,
conditionals) is left as written, and the Megatron-LM reader says which words it did not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from perfmodel.errors import PerfModelError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
_SEPARATORS = ("&&", "||", ";", "|", "&")
MAX_ARITH = 2**63  # bash's integers are 64-bit


@dataclass
class Command:
    """One simple command: its words after expansion, and the line it starts on."""

    words: list[str]
    line: int


@dataclass
class _Word:
    text: str = ""
    split: list[bool] = field(default_factory=list)  # per character: from an unquoted expansion
    quoted: bool = False  # any part quoted: an empty word still counts


class Reader:
    """Turns script text into commands, keeping the variables as bash would at each point."""

    def __init__(self, text: str):
        self.s, self.i, self.line = text, 0, 1
        self.env: dict[str, list[str]] = {}
        self.spread = False  # the last expansion was ${NAME[@]}: its elements are separate words

    def commands(self) -> list[Command]:
        out: list[Command] = []
        while self.i < len(self.s):
            start = self.line
            words = self._assign(self._command())
            if words:
                out.append(Command(words, start))
        return out

    # ------------------------------------------------------------ lexing
    def _command(self) -> list[_Word]:
        words: list[_Word] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "\n":
                self.i += 1
                self.line += 1
                if words:
                    return words
                continue
            if c in " \t\r":
                self.i += 1
                continue
            if c == "\\" and self.s.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
                continue
            if c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
                continue
            sep = next((x for x in _SEPARATORS if self.s.startswith(x, self.i)), None)
            if sep:
                self.i += len(sep)
                if words:
                    return words
                continue
            words.append(self._word())
        return words

    def _word(self) -> _Word:
        w = _Word()
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r\n;&|":
                break
            if c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise PerfModelError(f"line {self.line}: a single quote is never closed")
                self._add(w, s[self.i + 1 : end], False)
                self.line += s.count("\n", self.i, end)
                self.i, w.quoted = end + 1, True
            elif c == '"':
                self.i += 1
                self._double(w)
                w.quoted = True
            elif c == "\\":
                nxt = s[self.i + 1 : self.i + 2]
                if nxt == "\n":
                    self.line += 1
                else:
                    self._add(w, nxt, False)
                self.i += 2
            elif c == "$":
                self._add(w, self._dollar(), True)
            elif c == "(" and w.text.endswith("=") and _NAME.fullmatch(w.text[:-1]):
                self._array(w)
            else:
                j = self.i
                while j < len(s) and s[j] not in " \t\r\n;&|'\"\\$(":
                    j += 1
                j = max(j, self.i + 1)
                self._add(w, s[self.i : j], False)
                self.i = j
        return w

    def _double(self, w: _Word) -> None:
        s = self.s
        while True:
            if self.i >= len(s):
                raise PerfModelError(f"line {self.line}: a double quote is never closed")
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\" and s[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                if s[self.i + 1] == "\n":
                    self.line += 1
                else:
                    self._add(w, s[self.i + 1], False)
                self.i += 2
            elif c == "$":
                text = self._dollar()
                self._add(w, text, self.spread)  # "${NAME[@]}" still gives one word per element
                self.spread = False
            else:
                j = self.i
                while j < len(s) and s[j] not in '"\\$':
                    j += 1
                j = max(j, self.i + 1)
                self.line += s.count("\n", self.i, j)
                self._add(w, s[self.i : j], False)
                self.i = j

    def _array(self, w: _Word) -> None:
        """NAME=( words ): the words, newlines and comments allowed inside."""
        self.i += 1
        items: list[str] = []
        while True:
            while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
                self.line += self.s[self.i] == "\n"
                self.i += 1
            if self.i >= len(self.s):
                raise PerfModelError(f"line {self.line}: an array ( ... ) is never closed")
            if self.s[self.i] == ")":
                self.i += 1
                break
            if self.s[self.i] == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
                continue
            if self.s.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
                continue
            items += _fields(self._word())
        w.text += "\x00" + "\x00".join(items)  # an array value, split by the assignment

    def _add(self, w: _Word, text: str, split: bool) -> None:
        w.text += text
        w.split += [split] * len(text)

    # ------------------------------------------------------------ expansion
    def _dollar(self) -> str:
        s, i = self.s, self.i + 1
        if s.startswith("((", i):
            end = _matching(s, i + 2, "((", "))")
            if end < 0:
                raise PerfModelError(f"line {self.line}: $(( is never closed")
            self.i = end + 2
            return str(arithmetic(self._expand_text(s[i + 2 : end]), self.line))
        if s.startswith("{", i):
            end = s.find("}", i)
            if end < 0:
                raise PerfModelError(f"line {self.line}: ${{ is never closed")
            self.i = end + 1
            return self._parameter(s[i + 1 : end])
        m = _NAME.match(s, i)
        if m:
            self.i = m.end()
            return " ".join(self.env.get(m.group(0), ["$" + m.group(0)]))
        self.i = i
        return "$"  # $1, $@, $(...): left as written

    def _parameter(self, body: str) -> str:
        m = re.fullmatch(r"([A-Za-z_]\w*)(\[[@*]\])?(?::?-(.*))?", body, re.DOTALL)
        if not m:
            return "${" + body + "}"
        value = self.env.get(m.group(1))
        self.spread = m.group(2) == "[@]" and value is not None
        if value is None or (value == [""] and m.group(3) is not None):
            return self._expand_text(m.group(3)) if m.group(3) is not None else "${" + body + "}"
        return " ".join(value)

    def _expand_text(self, text: str) -> str:
        sub = Reader(text)
        sub.env = self.env
        w = _Word()
        sub._double_body(w)
        return w.text

    def _double_body(self, w: _Word) -> None:
        """Text expanded as inside a ${NAME:-default} or $(( )): parameters expanded, quotes
        removed (single-quoted text kept as written)."""
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "$":
                self._add(w, self._dollar(), False)
            elif c == "'":
                end = self.s.find("'", self.i + 1)
                end = len(self.s) if end < 0 else end
                self._add(w, self.s[self.i + 1 : end], False)
                self.i = end + 1
            elif c == '"':
                self.i += 1
            else:
                self._add(w, c, False)
                self.i += 1

    def _assign(self, words: list[_Word]) -> list[str]:
        """Run the command's leading assignments; what is left is the command's words."""
        if words and words[0].text == "export":
            words = words[1:]
            if all(_ASSIGN.fullmatch(w.text) or _NAME.fullmatch(w.text) for w in words):
                for w in words:
                    self._set(w)
                return []
        k = 0
        while k < len(words) and _ASSIGN.fullmatch(words[k].text):
            k += 1
        if k == len(words):
            for w in words:
                self._set(w)
            return []
        return [f for w in words[k:] for f in _fields(w)]

    def _set(self, w: _Word) -> None:
        m = _ASSIGN.fullmatch(w.text)
        if not m:
            return
        name, value = m.groups()
        self.env[name] = value.split("\x00")[1:] if value.startswith("\x00") else [value]


def _fields(w: _Word) -> list[str]:
    """A word after field splitting: unquoted expansions split at white space (IFS)."""
    if "\x00" in w.text:
        return [w.text]
    if not any(w.split):
        return [w.text] if w.text or w.quoted else []
    out, cur = [], ""
    for ch, sp in zip(w.text, w.split):
        if sp and ch in " \t\n":
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def _matching(s: str, i: int, opening: str, closing: str) -> int:
    depth = 1
    while i < len(s):
        if s.startswith(closing, i):
            depth -= 1
            if depth == 0:
                return i
            i += len(closing)
        elif s.startswith(opening, i):
            depth += 1
            i += len(opening)
        else:
            i += 1
    return -1


_TOKEN = re.compile(r"\s*(\d+|\*\*|[-+*/%()])")


def arithmetic(expr: str, line: int = 0) -> int:
    """bash's integer arithmetic on literals: + - * / % ** and parentheses, 64-bit, / truncating
    toward zero as C does. A variable left unexpanded or anything else is an error naming it."""
    tokens, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise PerfModelError(f"line {line}: $(( {expr} )): cannot read {expr[pos:].strip()!r}")
        tokens.append(m.group(1))
        pos = m.end()
    value, rest = _sum(tokens, line)
    if rest:
        raise PerfModelError(f"line {line}: $(( {expr} )): unexpected {' '.join(rest)}")
    return value


def _check(v: int, line: int) -> int:
    if not -MAX_ARITH <= v < MAX_ARITH:
        raise PerfModelError(f"line {line}: $(( )) overflows bash's 64-bit integers")
    return v


def _sum(t: list[str], line: int) -> tuple[int, list[str]]:
    v, t = _product(t, line)
    while t and t[0] in "+-":
        op, (w, t) = t[0], _product(t[1:], line)
        v = _check(v + w if op == "+" else v - w, line)
    return v, t


def _product(t: list[str], line: int) -> tuple[int, list[str]]:
    v, t = _power(t, line)
    while t and t[0] in ("*", "/", "%"):
        op, (w, t) = t[0], _power(t[1:], line)
        if op != "*" and w == 0:
            raise PerfModelError(f"line {line}: $(( )) divides by zero")
        q = abs(v) // abs(w) * (1 if (v < 0) == (w < 0) else -1) if op != "*" else 0
        v = _check(v * w if op == "*" else (q if op == "/" else v - q * w), line)
    return v, t


def _power(t: list[str], line: int) -> tuple[int, list[str]]:
    v, t = _unary(t, line)
    if t and t[0] == "**":
        w, t = _power(t[1:], line)  # right-associative
        if w < 0:
            raise PerfModelError(f"line {line}: $(( )) has a negative exponent")
        if v not in (0, 1, -1) and w > 63:
            raise PerfModelError(f"line {line}: $(( )) overflows bash's 64-bit integers")
        v = _check(v**w, line)
    return v, t


def _unary(t: list[str], line: int) -> tuple[int, list[str]]:
    if not t:
        raise PerfModelError(f"line {line}: $(( )) ends too soon")
    if t[0] in "+-":
        v, rest = _unary(t[1:], line)
        return (-v if t[0] == "-" else v), rest
    if t[0] == "(":
        v, rest = _sum(t[1:], line)
        if not rest or rest[0] != ")":
            raise PerfModelError(f"line {line}: $(( )) has an unclosed parenthesis")
        return v, rest[1:]
    if not t[0].isdigit():
        raise PerfModelError(f"line {line}: $(( )): unexpected {t[0]!r}")
    return _check(int(t[0]), line), t[1:]
