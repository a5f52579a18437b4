//! The generators against an independent reference: `tests/reference/ycsb_reference.py`, YCSB's
//! published algorithms in plain Python.
//!
//! - exact: key strings and deterministic values; every generator's sequence when both sides
//!   draw from the same SplitMix64 stream;
//! - statistical: each side draws with its own RNG (Python's Mersenne Twister, our `SmallRng`)
//!   and the two histograms must agree — two-sample χ² at p = 0.001 for the discrete
//!   generators, two-sample Kolmogorov–Smirnov at α = 0.001 for the exponential.
//!
//! Needs `python3` (or `DMKV_PYTHON`); without it the test skips loudly, unless
//! `DMKV_REQUIRE_INTEROP=1`.

#[path = "../../verbs/tests/support/interop.rs"]
mod interop;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::process::Command;
use ycsb::generator::*;

fn python() -> String {
    std::env::var("DMKV_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn have_python() -> bool {
    interop::tool_available(
        || {
            Command::new(python())
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        },
        "python3 (the YCSB reference generators)",
    )
}

fn reference(args: &[&str]) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/ycsb_reference.py"
    );
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The SplitMix64 stream the reference's `seq` draws from.
struct SplitMix64(u64);

impl RngCore for SplitMix64 {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// A generator under test, drawing from any RNG.
enum Gen {
    Zipfian(ZipfianGenerator),
    Scrambled(ScrambledZipfianGenerator),
    Latest {
        g: SkewedLatestGenerator,
        basis: i64,
        every: u64,
        n: u64,
    },
    Hotspot(HotspotIntegerGenerator),
    Exponential(ExponentialGenerator),
    Uniform(UniformLongGenerator),
}

impl Gen {
    fn new(spec: &[&str]) -> Gen {
        let i = |k: usize| spec[k].parse::<i64>().unwrap();
        let f = |k: usize| spec[k].parse::<f64>().unwrap();
        match spec[0] {
            "zipfian" => Gen::Zipfian(ZipfianGenerator::new(i(1), i(2), f(3))),
            "scrambled" => Gen::Scrambled(ScrambledZipfianGenerator::new(i(1), i(2), f(3))),
            "latest" => Gen::Latest {
                g: SkewedLatestGenerator::new(i(1)),
                basis: i(1),
                every: i(2) as u64,
                n: 0,
            },
            "hotspot" => Gen::Hotspot(HotspotIntegerGenerator::new(i(1), i(2), f(3), f(4))),
            "exponential" => Gen::Exponential(ExponentialGenerator::new(f(1), f(2))),
            "uniform" => Gen::Uniform(UniformLongGenerator::new(i(1), i(2))),
            other => panic!("unknown generator {other}"),
        }
    }

    fn next(&mut self, rng: &mut dyn RngCore) -> i64 {
        match self {
            Gen::Zipfian(g) => g.next_value(rng),
            Gen::Scrambled(g) => g.next_value(rng),
            Gen::Latest { g, basis, every, n } => {
                if *every > 0 && *n > 0 && *n % *every == 0 {
                    *basis += 1;
                }
                *n += 1;
                g.next_value(rng, *basis)
            }
            Gen::Hotspot(g) => g.next_value(rng),
            Gen::Exponential(g) => g.next_value(rng),
            Gen::Uniform(g) => g.next_value(rng),
        }
    }
}

const SPECS: &[&[&str]] = &[
    &["zipfian", "0", "999", "0.99"],
    &["zipfian", "10", "5009", "0.5"],
    &["scrambled", "0", "999", "0.99"],
    &["scrambled", "0", "99999", "0.99"],
    &["latest", "999", "10"],
    &["hotspot", "0", "999", "0.2", "0.8"],
    &["exponential", "95", "857.1428571"],
    &["uniform", "0", "999"],
];

#[test]
fn key_names_and_values_match_reference_exactly() {
    if !have_python() {
        return;
    }
    let out = reference(&["keys", "5000"]);
    let mut n = 0;
    for line in out.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let k: i64 = parts[0].parse().unwrap();
        assert_eq!(build_key_name(k, false, 1), parts[1], "hashed key {k}");
        assert_eq!(build_key_name(k, true, 1), parts[2], "ordered key {k}");
        assert_eq!(build_key_name(k, true, 12), parts[3], "padded key {k}");
        n += 1;
    }
    assert_eq!(n, 5007);
    let out = reference(&["values"]);
    for line in out.lines() {
        let mut parts = line.splitn(4, ' ');
        let (key, field, size, value) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap().parse::<usize>().unwrap(),
            parts.next().unwrap(),
        );
        assert_eq!(
            deterministic_value(key, field, size),
            value,
            "{key} {field} {size}"
        );
    }
}

#[test]
fn sequences_match_reference_exactly() {
    if !have_python() {
        return;
    }
    for spec in SPECS {
        let n = 20_000;
        let seed = 42u64;
        let mut args = vec!["seq", spec[0], "42"];
        let n_s = n.to_string();
        args.push(&n_s);
        args.extend_from_slice(&spec[1..]);
        let expected: Vec<i64> = reference(&args)
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        let mut g = Gen::new(spec);
        let mut rng = SplitMix64(seed);
        let got: Vec<i64> = (0..n).map(|_| g.next(&mut rng)).collect();
        let mismatches = got.iter().zip(&expected).filter(|(a, b)| a != b).count();
        assert_eq!(expected.len(), n);
        assert_eq!(
            mismatches,
            0,
            "{spec:?}: first mismatch at {:?}",
            got.iter().zip(&expected).position(|(a, b)| a != b)
        );
        eprintln!("exact: {spec:?}: {n} draws identical to the reference");
    }
}

/// Two-sample χ² over bins with at least 20 combined draws (the rest merged into one bin).
fn chi_square(a: &BTreeMap<i64, u64>, b: &BTreeMap<i64, u64>) -> (f64, usize) {
    let na: u64 = a.values().sum();
    let nb: u64 = b.values().sum();
    let keys: std::collections::BTreeSet<i64> = a.keys().chain(b.keys()).copied().collect();
    let mut bins: Vec<(f64, f64)> = Vec::new();
    let mut rest = (0.0, 0.0);
    for k in keys {
        let x = *a.get(&k).unwrap_or(&0) as f64;
        let y = *b.get(&k).unwrap_or(&0) as f64;
        if x + y >= 20.0 {
            bins.push((x, y));
        } else {
            rest.0 += x;
            rest.1 += y;
        }
    }
    if rest.0 + rest.1 > 0.0 {
        bins.push(rest);
    }
    let ka = (nb as f64 / na as f64).sqrt();
    let kb = (na as f64 / nb as f64).sqrt();
    let chi2 = bins
        .iter()
        .map(|&(x, y)| (ka * x - kb * y).powi(2) / (x + y))
        .sum();
    (chi2, bins.len() - 1)
}

/// The χ² critical value at p = 0.001 (Wilson–Hilferty).
fn chi2_critical(df: usize) -> f64 {
    let d = df as f64;
    let z = 3.0902;
    d * (1.0 - 2.0 / (9.0 * d) + z * (2.0 / (9.0 * d)).sqrt()).powi(3)
}

/// Two-sample KS statistic.
fn ks(a: &BTreeMap<i64, u64>, b: &BTreeMap<i64, u64>) -> f64 {
    let na: u64 = a.values().sum();
    let nb: u64 = b.values().sum();
    let keys: std::collections::BTreeSet<i64> = a.keys().chain(b.keys()).copied().collect();
    let (mut ca, mut cb, mut d) = (0u64, 0u64, 0.0f64);
    for k in keys {
        ca += a.get(&k).unwrap_or(&0);
        cb += b.get(&k).unwrap_or(&0);
        d = d.max((ca as f64 / na as f64 - cb as f64 / nb as f64).abs());
    }
    d
}

#[test]
fn histograms_match_reference_with_independent_rngs() {
    if !have_python() {
        return;
    }
    let n = 200_000u64;
    let n_s = n.to_string();
    for spec in SPECS {
        let mut args = vec!["hist", spec[0], "7", &n_s];
        args.extend_from_slice(&spec[1..]);
        let py: BTreeMap<i64, u64> = reference(&args)
            .lines()
            .map(|l| {
                let (v, c) = l.split_once(' ').unwrap();
                (v.parse().unwrap(), c.parse().unwrap())
            })
            .collect();
        let mut g = Gen::new(spec);
        let mut rng = SmallRng::seed_from_u64(1234);
        let mut ours: BTreeMap<i64, u64> = BTreeMap::new();
        for _ in 0..n {
            *ours.entry(g.next(&mut rng)).or_default() += 1;
        }
        if spec[0] == "exponential" {
            let d = ks(&ours, &py);
            let nf = n as f64;
            let crit = 1.949 * ((nf + nf) / (nf * nf)).sqrt();
            eprintln!("KS {spec:?}: D = {d:.5}, critical (alpha 0.001) = {crit:.5}");
            assert!(d < crit, "{spec:?}: KS D = {d} >= {crit}");
        } else {
            let (chi2, df) = chi_square(&ours, &py);
            let crit = chi2_critical(df);
            eprintln!("chi2 {spec:?}: {chi2:.1} on {df} df, critical (p 0.001) = {crit:.1}");
            assert!(chi2 < crit, "{spec:?}: chi2 = {chi2} on {df} df >= {crit}");
        }
    }
}
