# hostrss: large exception report just under the 16 MiB request cap: four chained exceptions with 3 MiB messages
msg = "m" * (3 << 20)
try:
    try:
        try:
            raise ValueError(msg)
        except ValueError as e:
            raise KeyError(msg) from e
    except KeyError as e:
        raise RuntimeError(msg) from e
except RuntimeError as e:
    raise TypeError(msg) from e
