# expect: contained
# Runs after 88_recycle_plant, usually on its recycled instance: nothing it planted may be visible here.
import builtins, gc, os, random, sys, warnings

found = []
if hasattr(builtins, "WASMBOX_PLANT"):
    found.append("builtins")
if "wasmbox_plant" in sys.modules:
    found.append("sys.modules")
if "/wasmbox_plant" in sys.path:
    found.append("sys.path")
if sys.getrecursionlimit() == 123:
    found.append("recursion limit")
if sys.getswitchinterval() == 0.5:
    found.append("switch interval")
if not gc.isenabled() or gc.get_threshold() == (7, 7, 7):
    found.append("gc settings")
if any(f[0] == "ignore" and f[2] is Warning for f in warnings.filters):
    found.append("warnings filters")
random.seed(1234)
planted = random.random()
random.seed()
if random.random() == planted:
    found.append("random state")
if "WASMBOX_PLANT" in os.environ or os.getenv("WASMBOX_PLANT_C") is not None:
    found.append("environment")
if os.getcwd() != "/workspace":
    found.append("cwd " + os.getcwd())
if any(name.startswith("plant") for name in os.listdir("/workspace")):
    found.append("workspace files")
for mount in ("/workspace", "/tmp", "/usr/local/lib"):
    try:
        os.listdir(mount)
    except OSError as e:
        found.append("mount %s: %s" % (mount, e))
fds = [os.open("/workspace/probe", os.O_CREAT | os.O_WRONLY) for _ in range(5)]
if min(fds) > 10:
    found.append("descriptors left open (first free %d)" % min(fds))
if not sys.stdout.line_buffering:
    found.append("stdout buffering")
print("ESCAPED: " + ", ".join(found) if found else "CONTAINED")
