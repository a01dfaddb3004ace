# expect: contained
# A Run's instance may serve the next Run once it is recycled. This one plants state everywhere a program can
# reach and ends normally, so that its instance is recycled; 89_recycle_find, which runs next, looks for it.
import atexit, builtins, codecs, gc, os, random, sys, warnings

builtins.WASMBOX_PLANT = "planted"
sys.modules["wasmbox_plant"] = sys
sys.path.insert(0, "/wasmbox_plant")
sys.setrecursionlimit(123)
sys.setswitchinterval(0.5)
gc.disable()
gc.set_threshold(7, 7, 7)
warnings.simplefilter("ignore")
codecs.register(lambda name: None)
# This run's own end runs it (as CPython does), when builtins still hold this run's plant; a later run that
# inherited it would run it without the plant.
atexit.register(lambda: None if getattr(builtins, "WASMBOX_PLANT", None) else print("ESCAPED: an atexit handler of an earlier run ran"))
random.seed(1234)
os.environ["WASMBOX_PLANT"] = "1"
os.putenv("WASMBOX_PLANT_C", "1")
os.chdir("/tmp")
held = [open("/workspace/plant%d" % k, "w") for k in range(20)]
for k in range(3, 8):  # the preopened mounts among them
    try:
        os.close(k)
    except OSError:
        pass
sys.stdout.reconfigure(line_buffering=False)
print("CONTAINED")
