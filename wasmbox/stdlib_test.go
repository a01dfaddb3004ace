package wasmbox_test

import (
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// TestStdlibModules exercises the standard library inside the built interpreter: every module listed here must
// import and do real work, and the modules that cannot work in the sandbox must fail with clean exceptions.
func TestStdlibModules(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, stdlibProgram)
	if res.Exception != nil {
		t.Fatalf("exception: %s", res.Exception.Traceback)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	for _, l := range lines {
		if !strings.HasSuffix(l, " ok") {
			t.Errorf("check failed: %s", l)
		}
	}
	if len(lines) != strings.Count(stdlibProgram, "@check") {
		t.Errorf("%d checks reported, %d defined:\n%s", len(lines), strings.Count(stdlibProgram, "@check"), res.Stdout)
	}
}

const stdlibProgram = `
import traceback
def check(f):
    try:
        r = f()
        print(f.__name__, "ok" if r else "FAILED: returned %r" % (r,))
    except BaseException as e:
        print(f.__name__, "FAILED:", "".join(traceback.format_exception(e)).replace("\n", " | "))
    return f

@check
def json_():
    import json; return json.loads(json.dumps({"a": [1, 2.5, None]})) == {"a": [1, 2.5, None]}
@check
def re_():
    import re; return re.sub(r"(\d+)", r"<\1>", "a1b22") == "a<1>b<22>"
@check
def math_():
    import math; return math.isclose(math.sqrt(2) ** 2, 2) and math.factorial(20) == 2432902008176640000
@check
def decimal_():
    from decimal import Decimal, getcontext; getcontext().prec = 30
    return str(Decimal(1) / Decimal(7)) == "0.142857142857142857142857142857"
@check
def datetime_zoneinfo():
    import datetime, zoneinfo
    d = datetime.datetime(2024, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    return d.utcoffset() == datetime.timedelta(hours=2) and d.astimezone(zoneinfo.ZoneInfo("America/New_York")).hour == 6
@check
def zoneinfo_legacy_names():
    # The backward-compatible names that code and pandas' own tests use (Debian ships them apart, in tzdata-legacy).
    import datetime, zoneinfo
    d = datetime.datetime(2024, 1, 15, 12)
    return (d.replace(tzinfo=zoneinfo.ZoneInfo("US/Pacific")).utcoffset() == datetime.timedelta(hours=-8)
            and d.replace(tzinfo=zoneinfo.ZoneInfo("US/Eastern")).utcoffset() == datetime.timedelta(hours=-5)
            and d.replace(tzinfo=zoneinfo.ZoneInfo("EST5EDT")).utcoffset() == datetime.timedelta(hours=-5)
            and "US/Pacific" in zoneinfo.available_timezones())
@check
def collections_():
    import collections; return collections.Counter("abca").most_common(1) == [("a", 2)]
@check
def itertools_():
    import itertools; return list(itertools.permutations("ab")) == [("a", "b"), ("b", "a")]
@check
def statistics_():
    import statistics; return statistics.median([3, 1, 2]) == 2 and statistics.stdev([1, 2, 3]) == 1.0
@check
def csv_():
    import csv, io; f = io.StringIO(); csv.writer(f).writerow(["a", "b,c"]); return f.getvalue() == 'a,"b,c"\r\n'
@check
def dataclasses_():
    import dataclasses
    @dataclasses.dataclass
    class P:
        x: int
        y: int = 2
    return dataclasses.asdict(P(1)) == {"x": 1, "y": 2}
@check
def typing_():
    import typing; return typing.get_type_hints(lambda: None) == {} and typing.Optional[int] == typing.Union[int, None]
@check
def pickle_():
    import pickle; return pickle.loads(pickle.dumps({"a": (1, 2)})) == {"a": (1, 2)}
@check
def struct_():
    import struct; return struct.unpack("<I", struct.pack("<I", 0xDEADBEEF))[0] == 0xDEADBEEF
@check
def fractions_():
    from fractions import Fraction; return Fraction(1, 3) + Fraction(1, 6) == Fraction(1, 2)
@check
def hashlib_():
    import hashlib
    return (hashlib.sha256(b"abc").hexdigest().startswith("ba7816bf") and hashlib.md5(b"").hexdigest() == "d41d8cd98f00b204e9800998ecf8427e"
            and len(hashlib.blake2b(b"x").digest()) == 64)
@check
def hmac_():
    import hmac, hashlib; return hmac.new(b"k", b"m", hashlib.sha256).hexdigest()[:8] == hmac.new(b"k", b"m", "sha256").hexdigest()[:8]
@check
def secrets_():
    import secrets; return len(secrets.token_hex(16)) == 32
@check
def zlib_gzip():
    import zlib, gzip; d = b"hello" * 100
    return zlib.decompress(zlib.compress(d)) == d and gzip.decompress(gzip.compress(d)) == d
@check
def zipfile_():
    import zipfile
    with zipfile.ZipFile("/workspace/t.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", "content")
    return zipfile.ZipFile("/workspace/t.zip").read("a.txt") == b"content"
@check
def bz2_():
    import bz2; return bz2.decompress(bz2.compress(b"x" * 1000)) == b"x" * 1000
@check
def lzma_():
    import lzma; return lzma.decompress(lzma.compress(b"y" * 1000)) == b"y" * 1000
@check
def sqlite3_():
    import sqlite3
    con = sqlite3.connect("/workspace/db.sqlite")
    con.execute("create table t (a int, b text)")
    con.executemany("insert into t values (?, ?)", [(1, "x"), (2, "y")])
    con.commit(); con.close()
    con = sqlite3.connect("/workspace/db.sqlite")
    return con.execute("select sum(a), group_concat(b) from t").fetchone() == (3, "x,y")
@check
def asyncio_():
    import asyncio
    async def one(x):
        await asyncio.sleep(0.01); return x
    async def main():
        r = await asyncio.gather(one(1), one(2))
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
        except TimeoutError:
            return r == [1, 2]
    return asyncio.run(main())
@check
def xml_etree():
    import xml.etree.ElementTree as ET; return ET.fromstring("<a><b x='1'/></a>").find("b").get("x") == "1"
@check
def email_():
    from email.message import EmailMessage
    m = EmailMessage(); m["Subject"] = "hi"; m.set_content("body")
    return "Subject: hi" in m.as_string()
@check
def uuid_():
    import uuid; return uuid.uuid4().version == 4 and str(uuid.uuid5(uuid.NAMESPACE_DNS, "x")).startswith("")
@check
def textwrap_():
    import textwrap; return textwrap.wrap("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]
@check
def difflib_():
    import difflib; return difflib.SequenceMatcher(None, "abcd", "abed").ratio() == 0.75
@check
def argparse_():
    import argparse; p = argparse.ArgumentParser(); p.add_argument("--n", type=int); return p.parse_args(["--n", "3"]).n == 3
@check
def logging_():
    import logging, io; s = io.StringIO(); l = logging.getLogger("t"); l.addHandler(logging.StreamHandler(s)); l.warning("w")
    return s.getvalue() == "w\n"
@check
def tempfile_():
    import tempfile, os
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write("t")
    ok = f.name.startswith("/tmp/") and open(f.name).read() == "t"
    os.remove(f.name)
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "x"), "w").write("1")
    return ok
@check
def time_sleep():
    import time; t = time.monotonic(); time.sleep(0.02); return time.monotonic() - t >= 0.02
@check
def process_time_resets():
    import time; return time.process_time() < 5
@check
def socket_fails_cleanly():
    import socket
    try:
        socket.socket()
    except OSError:
        return True
@check
def subprocess_fails_cleanly():
    import subprocess
    try:
        subprocess.run(["true"])
    except OSError:
        return True
@check
def threading_fails_cleanly():
    import threading
    try:
        threading.Thread(target=print).start()
    except RuntimeError:
        return True
@check
def ctypes_fails_cleanly():
    try:
        import ctypes
    except ImportError:
        return True
`

// The interpreter runs in UTF-8 mode: WASI has no locale, and without it stdio, open() and file names were ASCII.
func TestUTF8Everywhere(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `import sys, os, locale
print(sys.stdout.encoding, sys.getfilesystemencoding(), sys.flags.utf8_mode, locale.getpreferredencoding(False))
open("naïve ✓.txt", "w").write("héllo ✓")
print(open("naïve ✓.txt").read(), os.listdir("."))`)
	if want := "utf-8 utf-8 1 utf-8\nhéllo ✓ ['naïve ✓.txt']\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %s)", res.Stdout, want, res.Stderr)
	}
	if len(res.FilesChanged) != 1 || res.FilesChanged[0].Path != "naïve ✓.txt" {
		t.Errorf("files changed %+v", res.FilesChanged)
	}
}
