//! Medians, ranges and ratios of repeated measurements.

/// The median, minimum and maximum of a set of measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    /// The median (the mean of the two middle values of an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many values there were.
    pub count: usize,
}

impl Spread {
    /// The spread of `values` (NaNs are ignored); `None` when there is no value.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            count: n,
        })
    }
}

/// `a / b`, or `None` when `b` is zero (or either is not finite).
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

/// A ratio as the tables print it: `1.23×`, or `–` when there is none.
pub fn show_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "–".to_string(), |r| format!("{r:.2}×"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        let s = Spread::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.count), (3.0, 1.0, 5.0, 3));
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN, 2.0]).unwrap().median, 2.0);
    }

    #[test]
    fn ratios_refuse_zero_denominators() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(show_ratio(Some(1.5)), "1.50×");
        assert_eq!(show_ratio(None), "–");
    }
}
