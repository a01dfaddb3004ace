# hostrss: deep directory chain by renames: 15-level trees of 255-byte names stacked above the chain until the file quota; the host then lists every change (FilesChanged) and, in the second Exec, marks the tree again
# mode: session
# execs: 2
import os, time

if "depth" not in globals():
    os.chdir("/workspace")
    seg = "d" * 255
    leaf = "/".join([seg] * 15)  # 15 levels, 3.8 KB: every path the guest names stays under PATH_MAX
    depth = 0
    start = time.monotonic()
    try:
        os.makedirs("c/" + leaf)
        depth = 16
        while time.monotonic() - start < 3.5:
            os.makedirs("n/" + leaf)
            os.rename("c", "n/" + leaf + "/c")  # the whole chain moves under a new 15-level tree
            os.rename("n", "c")
            depth += 16
    except OSError as e:
        print("stopped:", e)
    print("depth", depth, "in", round(time.monotonic() - start, 2), "s")
else:
    print("second exec, depth", depth)
