# hostrss: huge exception report: a chain of four exceptions with 64 MiB messages (a report far over the 16 MiB request cap)
msg = "m" * (64 << 20)
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
