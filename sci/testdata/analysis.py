# A realistic analysis: the sci runtime's output must equal native numpy 2.2.4 / pandas 2.2.3 built from the
# same sources (testdata/analysis.native.txt, recorded by testdata/record-native.sh). Floats are printed to 10
# significant digits: SIMD and FMA on the native side may change the last bits, never the analysis.
import io
import numpy as np
import pandas as pd

def g(x):
    return f"{float(x):.10g}"

rng = np.random.default_rng(42)
n = 2000
idx = pd.date_range("2024-01-01", periods=n, freq="h")
df = pd.DataFrame({
    "t": idx,
    "store": rng.choice(["north", "south", "east", "west"], n),
    "product": rng.choice(["tea", "coffee", "cocoa"], n),
    "units": rng.integers(1, 20, n),
    "price": rng.normal(4.0, 0.5, n).round(2),
})
df["revenue"] = df.units * df.price

print("== groupby.agg")
agg = df.groupby("store").agg(units=("units", "sum"), revenue=("revenue", "sum"), mean_price=("price", "mean"))
for store, row in agg.iterrows():
    print(store, int(row.units), g(row.revenue), g(row.mean_price))

print("== pivot_table")
pv = df.pivot_table(index="store", columns="product", values="units", aggfunc="sum")
print(pv.to_string())

print("== resample (daily revenue, first 5 days; weekly mean units)")
daily = df.set_index("t")["revenue"].resample("D").sum()
for t, v in daily.head(5).items():
    print(t.date(), g(v))
weekly = df.set_index("t")["units"].resample("W").mean()
print(len(weekly), [g(v) for v in weekly.head(3)])

print("== rolling and shift")
r = df.set_index("t")["units"].rolling(24).mean().dropna()
print(len(r), g(r.iloc[0]), g(r.max()), g(df.units.shift(3).fillna(0).sum()))

print("== read_csv round trip")
csv = df.to_csv(index=False)
back = pd.read_csv(io.StringIO(csv), parse_dates=["t"])
print(back.shape, [str(d) for d in back.dtypes], bool((back.revenue - df.revenue).abs().max() < 1e-9))

print("== merge and value_counts")
prices = pd.DataFrame({"product": ["tea", "coffee", "cocoa"], "cost": [1.5, 2.0, 2.5]})
m = df.merge(prices, on="product")
m["margin"] = m.revenue - m.units * m.cost
print(g(m.margin.sum()), df["product"].value_counts().sort_index().to_dict())

print("== datetime")
ts = pd.Timestamp("2024-03-01 12:34:56.789")
print(ts.as_unit("s"), ts.tz_localize("UTC").tz_convert("Europe/Berlin"), (ts + pd.offsets.MonthEnd()).date())
print(pd.DataFrame({"t": idx[:2]}).to_json())

print("== linear algebra")
a = rng.standard_normal((60, 60))
b = rng.standard_normal(60)
x = np.linalg.solve(a, b)
print(bool(np.allclose(a @ x, b)), g(np.linalg.det(a[:8, :8])), g(np.linalg.norm(np.linalg.inv(a[:5, :5]))))
w = np.linalg.eigvalsh(a[:6, :6] @ a[:6, :6].T)
print([g(v) for v in w])
q, rr = np.linalg.qr(a[:10, :4])
print(bool(np.allclose(q @ rr, a[:10, :4])), [g(v) for v in np.linalg.svd(a[:5, :5], compute_uv=False)])
coef = np.polyfit(np.arange(50.0), 3 * np.arange(50.0) + 1 + rng.normal(0, 0.1, 50), 1)
print([g(c) for c in coef])

print("== FFT")
sig = np.sin(2 * np.pi * 50 * np.linspace(0, 1, 1024, endpoint=False)) + 0.5 * np.sin(2 * np.pi * 120 * np.linspace(0, 1, 1024, endpoint=False))
spec = np.abs(np.fft.rfft(sig))
print(sorted(int(i) for i in np.argsort(spec)[-2:]), g(spec.max()), bool(np.allclose(np.fft.irfft(np.fft.rfft(sig)), sig)))

print("== legacy random (np.random.seed)")
np.random.seed(1)
print(np.random.poisson(5, 5).tolist(), np.random.binomial(10, 0.5, 5).tolist(), np.random.geometric(0.3, 3).tolist(),
      np.random.multinomial(10, [0.2, 0.3, 0.5]).tolist(), np.random.negative_binomial(3, 0.5, 3).tolist(),
      np.random.hypergeometric(10, 5, 6, 3).tolist(), np.random.zipf(2.0, 3).tolist(), np.random.logseries(0.5, 3).tolist())
