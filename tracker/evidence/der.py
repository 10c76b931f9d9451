"""Just enough DER (ASN.1's distinguished encoding) for RFC 3161: reading the nested
TLVs of a time-stamp response, and writing the few types of a time-stamp request.

Only single-octet tags and definite lengths: DER has no other (a BER indefinite length is
refused, naming it).
"""

from __future__ import annotations

from dataclasses import dataclass

SEQUENCE = 0x30
SET = 0x31
INTEGER = 0x02
BOOLEAN = 0x01
OCTET_STRING = 0x04
NULL = 0x05
OID = 0x06
UTF8_STRING = 0x0C
GENERALIZED_TIME = 0x18


class DerError(ValueError):
    """The bytes are not the DER they should be."""


@dataclass(frozen=True)
class Node:
    """One TLV: its identifier octet and its contents."""

    tag: int
    body: bytes

    def children(self) -> list[Node]:
        """The TLVs inside a constructed one."""
        return read_all(self.body)

    def context(self, number: int) -> Node | None:
        """The child tagged ``[number]`` (context-specific), if there is one."""
        return next((c for c in self.children() if c.tag & 0x1F == number and c.tag & 0x80), None)

    def integer(self) -> int:
        self._expect(INTEGER)
        return int.from_bytes(self.body, "big", signed=True)

    def oid(self) -> str:
        self._expect(OID)
        return decode_oid(self.body)

    def _expect(self, tag: int) -> None:
        if self.tag != tag:
            raise DerError(f"expected tag 0x{tag:02x}, found 0x{self.tag:02x}")


def read(data: bytes) -> Node:
    """The one TLV ``data`` holds (nothing may follow it)."""
    node, end = _read(data, 0)
    if end != len(data):
        raise DerError(f"{len(data) - end} bytes after the end of the DER value")
    return node


def read_all(data: bytes) -> list[Node]:
    nodes, at = [], 0
    while at < len(data):
        node, at = _read(data, at)
        nodes.append(node)
    return nodes


def _read(data: bytes, at: int) -> tuple[Node, int]:
    if at + 2 > len(data):
        raise DerError("truncated DER value")
    tag, first = data[at], data[at + 1]
    if tag & 0x1F == 0x1F:
        raise DerError("multi-octet tags are not used by RFC 3161")
    at += 2
    if first == 0x80:
        raise DerError("indefinite length (BER, not DER)")
    if first & 0x80:
        count = first & 0x7F
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    else:
        length = first
    if at + length > len(data):
        raise DerError("truncated DER value")
    return Node(tag, data[at : at + length]), at + length


def decode_oid(body: bytes) -> str:
    if not body:
        raise DerError("empty object identifier")
    arcs, value = [], 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def tlv(tag: int, body: bytes) -> bytes:
    """A TLV of ``tag`` around ``body``."""
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + body


def sequence(*items: bytes) -> bytes:
    return tlv(SEQUENCE, b"".join(items))


def integer(value: int) -> bytes:
    return tlv(INTEGER, value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True))


def boolean(value: bool) -> bytes:
    return tlv(BOOLEAN, b"\xff" if value else b"\x00")


def octets(value: bytes) -> bytes:
    return tlv(OCTET_STRING, value)


def null() -> bytes:
    return tlv(NULL, b"")


def oid(dotted: str) -> bytes:
    arcs = [int(a) for a in dotted.split(".")]
    body = bytearray()
    for arc in [40 * arcs[0] + arcs[1], *arcs[2:]]:
        chunk = [arc & 0x7F]
        while arc := arc >> 7:
            chunk.append(0x80 | (arc & 0x7F))
        body += bytes(reversed(chunk))
    return tlv(OID, bytes(body))
