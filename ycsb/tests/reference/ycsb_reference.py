#!/usr/bin/env python3
"""An independent reference for the ycsb crate's generators: YCSB's published algorithms
(site.ycsb.generator.*, CoreWorkload.buildKeyName / buildDeterministicValue) in plain Python,
with Java's integer and floating-point semantics spelled out.

  keys N                          key names for key numbers 0..N-1 and a few edge numbers
  values                          deterministic field values
  seq GEN SEED N ARGS...          N draws driven by SplitMix64(SEED) (exact comparison)
  hist GEN SEED N ARGS...         "value count" lines of N draws from Python's own Mersenne
                                  Twister (statistical comparison)

GEN: zipfian MIN MAX THETA | scrambled MIN MAX THETA | latest BASIS EVERY | hotspot LB UB HOT OPN
     | exponential PERCENTILE RANGE | uniform LB UB
"""
import math
import random
import sys
from collections import Counter

M64 = (1 << 64) - 1
LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)


def s64(x):
    x &= M64
    return x - (1 << 64) if x >= (1 << 63) else x


def s32(x):
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= (1 << 31) else x


def jabs(x):  # Math.abs(long): abs(Long.MIN_VALUE) is Long.MIN_VALUE
    return s64(-x) if x < 0 else x


def jrem(a, b):  # Java's % (sign of the dividend)
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def jlong(d):  # (long) of a double
    if d != d:
        return 0
    if d >= 2.0 ** 63:
        return LONG_MAX
    if d <= -(2.0 ** 63):
        return LONG_MIN
    return int(d)


def jint_of_double(d):  # (int) of a double
    if d != d:
        return 0
    if d >= 2.0 ** 31:
        return (1 << 31) - 1
    if d <= -(2.0 ** 31):
        return -(1 << 31)
    return int(d)


FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
FNV_PRIME_64 = 1099511628211


def fnvhash64(val):
    h = FNV_OFFSET_BASIS_64
    v = val & M64
    for _ in range(8):
        octet = v & 0xFF
        v >>= 8
        h ^= octet
        h = (h * FNV_PRIME_64) & M64
    return jabs(s64(h))


def build_key_name(keynum, ordered, zeropadding):
    k = keynum if ordered else fnvhash64(keynum)
    value = str(k)
    return "user" + "0" * max(0, zeropadding - len(value)) + value


def java_hash(s):
    h = 0
    for c in s:
        h = s32(h * 31 + ord(c))
    return h


def deterministic_value(key, field, size):
    sb = key + ":" + field
    while len(sb) < size:
        sb = sb + ":" + str(java_hash(sb))
    return sb[:size]


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & M64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


class Mersenne:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def next_u64(self):
        return self.r.getrandbits(64)


def next_double(src):  # ThreadLocalRandom.nextDouble
    return (src.next_u64() >> 11) * (1.0 / (1 << 53))


def next_long(src):
    return s64(src.next_u64())


def zetastatic(st, n, theta, initialsum):
    s = initialsum
    for i in range(st, n):
        s += 1.0 / math.pow(float(i + 1), theta)
    return s


class Zipfian:
    def __init__(self, mn, mx, theta, zetan=None):
        self.items = mx - mn + 1
        self.base = mn
        self.theta = theta
        self.zeta2theta = zetastatic(0, 2, theta, 0.0)
        self.alpha = 1.0 / (1.0 - theta)
        self.zetan = zetastatic(0, self.items, theta, 0.0) if zetan is None else zetan
        self.countforzeta = self.items
        self.eta = (1 - math.pow(2.0 / self.items, 1 - theta)) / (1 - self.zeta2theta / self.zetan)

    def next_long(self, u, itemcount):
        if itemcount > self.countforzeta:
            self.zetan = zetastatic(self.countforzeta, itemcount, self.theta, self.zetan)
            self.countforzeta = itemcount
            # YCSB keeps eta on the constructor's item count.
            self.eta = (1 - math.pow(2.0 / self.items, 1 - self.theta)) / (1 - self.zeta2theta / self.zetan)
        uz = u * self.zetan
        if uz < 1.0:
            return self.base
        if uz < 1.0 + math.pow(0.5, self.theta):
            return self.base + 1
        return self.base + jlong(itemcount * math.pow(self.eta * u - self.eta + 1, self.alpha))

    def next(self, src):
        return self.next_long(next_double(src), self.items)


class Scrambled:
    ZETAN = 26.46902820178302
    ITEM_COUNT = 10000000000

    def __init__(self, mn, mx, theta):
        assert theta == 0.99, "the reference has YCSB's precomputed zeta only for 0.99"
        self.min = mn
        self.itemcount = mx - mn + 1
        self.gen = Zipfian(0, self.ITEM_COUNT, theta, self.ZETAN)

    def next(self, src):
        return self.min + jrem(fnvhash64(self.gen.next(src)), self.itemcount)


class Latest:
    """SkewedLatestGenerator over a basis counter that grows by one every EVERY draws."""

    def __init__(self, basis, every):
        self.basis = basis
        self.every = every
        self.n = 0
        self.zipf = Zipfian(0, max(basis, 1) - 1, 0.99)

    def next(self, src):
        if self.every and self.n % self.every == 0 and self.n > 0:
            self.basis += 1
        self.n += 1
        mx = self.basis
        return mx - self.zipf.next_long(next_double(src), mx)


class Hotspot:
    def __init__(self, lb, ub, hot, opn):
        self.lb = lb
        interval = ub - lb + 1
        self.hot_interval = jint_of_double(interval * hot)
        self.cold_interval = interval - self.hot_interval
        self.opn = opn

    def next(self, src):
        u = next_double(src)
        l = next_long(src)
        if u < self.opn:
            return self.lb + jrem(jabs(l), self.hot_interval)
        return self.lb + self.hot_interval + jrem(jabs(l), self.cold_interval)


class Exponential:
    def __init__(self, percentile, rng):
        self.gamma = -math.log(1.0 - percentile / 100.0) / rng

    def next(self, src):
        u = next_double(src)
        if u == 0.0:
            return LONG_MAX
        return jlong(-math.log(u) / self.gamma)


class Uniform:
    def __init__(self, lb, ub):
        self.lb = lb
        self.interval = ub - lb + 1

    def next(self, src):
        return jrem(jabs(next_long(src)), self.interval) + self.lb


def make(gen, args):
    if gen == "zipfian":
        return Zipfian(int(args[0]), int(args[1]), float(args[2]))
    if gen == "scrambled":
        return Scrambled(int(args[0]), int(args[1]), float(args[2]))
    if gen == "latest":
        return Latest(int(args[0]), int(args[1]))
    if gen == "hotspot":
        return Hotspot(int(args[0]), int(args[1]), float(args[2]), float(args[3]))
    if gen == "exponential":
        return Exponential(float(args[0]), float(args[1]))
    if gen == "uniform":
        return Uniform(int(args[0]), int(args[1]))
    raise SystemExit("unknown generator " + gen)


def main(argv):
    cmd = argv[0]
    out = sys.stdout
    if cmd == "keys":
        n = int(argv[1])
        nums = list(range(n)) + [2**31 - 1, 2**31, 10**10, 2**62, -1, LONG_MAX, LONG_MIN]
        for k in nums:
            out.write("%d %s %s %s\n" % (k, build_key_name(k, False, 1), build_key_name(k, True, 1),
                                         build_key_name(k, True, 12)))
    elif cmd == "values":
        for key, field, size in [("user1", "field0", 100), ("user6284781860667377211", "field9", 1000),
                                 ("k", "f", 1), ("k", "f", 3), ("user42", "field3", 37)]:
            out.write("%s %s %d %s\n" % (key, field, size, deterministic_value(key, field, size)))
    elif cmd in ("seq", "hist"):
        gen, seed, n = argv[1], int(argv[2]), int(argv[3])
        g = make(gen, argv[4:])
        src = SplitMix64(seed) if cmd == "seq" else Mersenne(seed)
        if cmd == "seq":
            out.write("\n".join(str(g.next(src)) for _ in range(n)) + "\n")
        else:
            c = Counter(g.next(src) for _ in range(n))
            out.write("".join("%d %d\n" % kv for kv in sorted(c.items())))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
