# The bootstrap of an escalated run: the container's first process. Written by escalate/; not a security boundary
# (the program runs with the same uid and could replace it), only plumbing, so everything it sends is re-checked
# on the host.
#
# 1. extracts /run/wasmbox/in.tar (regular files and directories only) into the workspace and hashes each file;
# 2. runs the program (job.json "argv") in the workspace with the container's stdin, stdout and stderr;
# 3. sends back the files that differ from what was copied in, and the ones deleted, over the tool socket;
# 4. exits with the program's exit code (128+n when a signal n killed it).
import base64
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tarfile

RUN = "/run/wasmbox"
CHUNK = 768 << 10  # raw bytes per message (about 1 MiB of base64)


def safe(name):
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def extract(ws):
    manifest = {}
    src = os.path.join(RUN, "in.tar")
    if not os.path.exists(src):
        return manifest
    with tarfile.open(src, "r:") as tf:
        for m in tf:
            name = safe(m.name)
            if name is None:
                continue
            dst = os.path.join(ws, name)
            if m.isdir():
                os.makedirs(dst, exist_ok=True)
            elif m.isreg():
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with tf.extractfile(m) as r, open(dst, "wb") as w:
                    h = hashlib.sha256()
                    for b in iter(lambda: r.read(1 << 20), b""):
                        h.update(b)
                        w.write(b)
                os.chmod(dst, 0o755 if m.mode & 0o111 else 0o644)
                manifest[name] = h.hexdigest()
    return manifest


class Host:
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(os.path.join(RUN, "tools.sock"))
        self.r = self.s.makefile("rb")
        self.n = 0

    def send(self, op, **kw):
        self.n += 1
        kw.update(v=1, id=self.n, op=op)
        self.s.sendall(json.dumps(kw, separators=(",", ":")).encode() + b"\n")
        resp = json.loads(self.r.readline(1 << 20) or b"{}")
        if not resp.get("ok"):
            raise RuntimeError((resp.get("error") or {}).get("message", "no answer"))


def send_changes(ws, manifest):
    host = Host()
    seen = set()
    for root, dirs, files in os.walk(ws):
        dirs.sort()
        for fn in sorted(files):
            path = os.path.join(root, fn)
            rel = os.path.relpath(path, ws).replace(os.sep, "/")
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            seen.add(rel)
            if rel in manifest and digest(path) == manifest[rel]:
                continue
            mode = 0o755 if st.st_mode & 0o111 else 0o644
            with open(path, "rb") as f:
                first = True
                while True:
                    b = f.read(CHUNK)
                    if not b and not first:
                        break
                    host.send("file", path=rel, mode=mode, append=not first, data=base64.b64encode(b).decode())
                    first = False
                    if len(b) < CHUNK:
                        break
    for rel in sorted(set(manifest) - seen):
        host.send("delete", path=rel)
    host.send("done")


def main():
    with open(os.path.join(RUN, "job.json")) as f:
        job = json.load(f)
    ws = job["workdir"]
    manifest = extract(ws)
    try:
        proc = subprocess.Popen(job["argv"], cwd=ws)
    except OSError as e:
        print("escalate: cannot run %s: %s" % (job["argv"][0], e), file=sys.stderr)
        sys.exit(127)
    try:
        # A backstop for a host that died mid-run (the host kills the container at the deadline itself).
        rc = proc.wait(timeout=job.get("backstop_seconds"))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        print("escalate: backstop deadline reached; program killed", file=sys.stderr)
        sys.exit(137)
    if rc < 0:
        rc = 128 - rc
    if job.get("files_out"):
        try:
            send_changes(ws, manifest)
        except Exception as e:  # the program's exit code matters more; the host notices missing files
            print("escalate: could not send the workspace back: %s" % e, file=sys.stderr)
    sys.exit(rc)


main()
