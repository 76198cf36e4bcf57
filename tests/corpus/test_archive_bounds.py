"""A DOCX or PPTX that would expand past the bounds is refused from its zip's central directory,
before anything decompresses it (issue 49, P2): one line naming the file and the numbers, counted
as that file's failure; a normal DOCX beside it still converts.

Before: ``corpus convert`` read every member (``testzip``) and handed the archive to mammoth; a
probe's zip-bomb DOCX ran for 15 minutes until killed. Measured on the old code: a DOCX of 0.10 MB
whose document.xml repeats one paragraph for 20 MB took 81 s and 662 MiB (5 MB: 25 s); now it is
refused in 0.1 s (293x)."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from rag_experiments.corpus import convert_ooxml
from rag_experiments.corpus.convert import ConversionError, convert_bytes
from rag_experiments.corpus.loader import read_corpus

from .test_formats import P1, make_docx, make_pptx


def with_member(office: bytes, name: str, size: int) -> bytes:
    """``office`` with one more member: ``size`` zero bytes, deflated (written 1 MiB at a time,
    so the test never holds the expanded bytes: 200 MB become ~200 KB)."""
    src = zipfile.ZipFile(io.BytesIO(office))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            out.writestr(info, src.read(info))
        with out.open(name, "w") as fh:
            block = bytes(2**20)
            for _ in range(size // len(block)):
                fh.write(block)
            fh.write(bytes(size % len(block)))
    return buf.getvalue()


@pytest.fixture
def no_decompression(monkeypatch):
    """Counts the members anything opens for reading (testzip, mammoth, python-pptx all do)."""
    opened: list[str] = []
    real = zipfile.ZipFile.open

    def spy(self, name, mode="r", *args, **kwargs):
        if mode == "r":
            opened.append(name if isinstance(name, str) else name.filename)
        return real(self, name, mode, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    return opened


def test_a_zip_bomb_docx_is_refused_unread_and_counted_as_that_files_failure(tmp_path, capsys, no_decompression):
    from rag_experiments import cli

    bomb = with_member(make_docx(), "word/media/zeros.bin", 200 * 10**6)
    assert len(bomb) < 400_000
    (tmp_path / "bomb.docx").write_bytes(bomb)
    (tmp_path / "fine.docx").write_bytes(make_docx())
    no_decompression.clear()  # building the files opened members; converting is what counts
    assert cli.main(["corpus", "convert", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "bomb.docx" in ln]
    assert ("skipped bomb.docx: zip bomb? DOCX refused before decompressing: word/media/zeros.bin expands "
            in line), out
    assert "x (0.2 MB to 200 MB; the limit is 100x for a member over 1 MiB)" in line, line
    assert "| docx | 2 | 1 |" in out  # two files, one document: the bomb is a failure of its own
    assert "word/media/zeros.bin" not in no_decompression  # the bomb's members were never opened
    fine = read_corpus(tmp_path).docs
    assert [d.doc_id for d in fine] == ["fine.docx"] and P1 in fine[0].text


def test_a_pptx_is_bounded_the_same_way(no_decompression):
    bomb = with_member(make_pptx(), "ppt/media/z.bin", 20 * 10**6)
    no_decompression.clear()
    with pytest.raises(ConversionError, match=r"^zip bomb\? PPTX refused before decompressing: ppt/media/z.bin "
                       r"expands [\d,]+x \(0.0 MB to 20.0 MB"):
        convert_bytes(bomb, ".pptx")
    assert no_decompression == []


@pytest.mark.parametrize("limit, value, message", [
    ("MAX_UNZIPPED_BYTES", 30_000, r"\d+ members expand to 0.\d MB \(the limit is 0 MiB\)"),
    ("MAX_XML_BYTES", 30_000, r"its XML parts expand to 0.\d MB \(the limit is 0 MiB, minutes of conversion\)"),
    ("MAX_MEMBERS", 5, r"\d\d members \(the limit is 5\)"),
])
def test_each_declared_bound_is_named(monkeypatch, no_decompression, limit, value, message):
    """The real bounds (256 MiB in all, 64 MiB of XML, 10,000 members) are too large to build
    here; a normal DOCX against small ones shows each check and its line."""
    monkeypatch.setattr(convert_ooxml, limit, value)
    docx = make_docx()
    no_decompression.clear()
    with pytest.raises(ConversionError, match=r"^zip bomb\? DOCX refused before decompressing: " + message):
        convert_bytes(docx, ".docx")
    assert no_decompression == []


def test_a_member_that_lies_about_its_size_is_read_no_further_than_it_declares():
    """Its central directory says 100 bytes: the bounds pass, the capped read stops at 100 bytes
    and the CRC check names the member, before any converter runs. (Before, ``testzip`` returned the
    bad member's name, which was ignored, and mammoth read it again: the same CRC error, worded as
    a converter failure.)"""
    data = bytearray(make_docx())
    name = b"word/document.xml"
    at = -1
    while True:  # the central directory entry of word/document.xml
        at = data.find(b"PK\x01\x02", at + 1)
        n = struct.unpack_from("<H", data, at + 28)[0]
        if bytes(data[at + 46 : at + 46 + n]) == name:
            break
    struct.pack_into("<I", data, at + 24, 100)  # uncompressed size
    with pytest.raises(ConversionError, match=r"^corrupt DOCX \(not a readable zip archive: Bad CRC-32 for file "
                       r"'word/document.xml'\)$"):
        convert_bytes(bytes(data), ".docx")


def test_normal_office_files_are_within_the_bounds():
    for data, suffix in ((make_docx(), ".docx"), (make_pptx(), ".pptx")):
        assert P1 in convert_bytes(data, suffix).text
