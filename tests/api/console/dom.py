"""A small HTML tree for console page tests: find elements by id, tag, class or attribute."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

__all__ = ["Node", "dom", "textarea"]

_VOID = {"input", "br", "meta", "link", "img", "hr", "col", "source"}


# -- a small DOM over html.parser: the tests look at elements as a user (or the browser test) does


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return " ".join("".join(c if isinstance(c, str) else f" {c.text()} " for c in self.children).split())

    def all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        out: list[Node] = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and all(c.attrs.get(k.rstrip("_").replace("_", "-")) == v
                                                         for k, v in attrs.items()):
                    out.append(c)
                out.extend(c.all(tag, **attrs))
        return out

    def one(self, tag: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag or '*'} {attrs}> elements"
        return found[0]

    def has(self, tag: str | None = None, **attrs: str) -> bool:
        return bool(self.all(tag, **attrs))


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def dom(html: str) -> Node:
    b = _Builder()
    b.feed(html)
    b.close()
    return b.root


def textarea(page: Node, ident: str) -> str:
    """A textarea's value as the browser takes it (the newline after the start tag dropped)."""
    raw = "".join(c for c in page.one("textarea", id=ident).children if isinstance(c, str))
    return raw[1:] if raw.startswith("\n") else raw


# -- helpers -------------------------------------------------------------------------------------
