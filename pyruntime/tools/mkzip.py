"""mkzip.py SRC_DIR OUT_ZIP — a reproducible zip of a directory tree.

Entries are sorted, every timestamp is SOURCE_DATE_EPOCH, permissions are normalised (0644 files, 0755 dirs),
directories get explicit entries (wazero's fs.FS view of the zip needs them, e.g. the empty lib-dynload/).
.pyc files are stored (they are already dense and read often); everything else is deflated.
"""
import os
import sys
import time
import zipfile

def main(src, out):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    entries = []
    for root, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(root, src)
        if rel != ".":
            entries.append((rel.replace(os.sep, "/") + "/", None))
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.islink(p):
                raise SystemExit(f"mkzip: refusing symlink {p}")
            entries.append((os.path.relpath(p, src).replace(os.sep, "/"), p))
    entries.sort(key=lambda e: e[0])
    with zipfile.ZipFile(out, "w") as z:
        for name, path in entries:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.create_system = 3
            if path is None:
                info.external_attr = (0o40755 << 16) | 0x10
                z.writestr(info, b"")
                continue
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_STORED if name.endswith(".pyc") else zipfile.ZIP_DEFLATED
            with open(path, "rb") as fh:
                z.writestr(info, fh.read(), compresslevel=9)

if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: mkzip.py SRC_DIR OUT_ZIP")
    main(sys.argv[1], sys.argv[2])
