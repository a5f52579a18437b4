//! Plot colours: one colour per system for every chart of a `ycsb plot`, from a fixed list of
//! 18 distinguishable colours, assigned in the order of the sorted system names (not in the
//! order series happen to be drawn), so a system keeps its colour in every chart of the run.

use plotters::style::RGBColor;
use std::collections::BTreeMap;

/// The fixed list: Tableau's ten, then eight darker or stronger ones.
pub const COLORS: [RGBColor; 18] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 117),
    RGBColor(128, 0, 0),
    RGBColor(128, 128, 0),
    RGBColor(70, 153, 144),
    RGBColor(240, 50, 230),
    RGBColor(0, 0, 0),
    RGBColor(75, 0, 130),
    RGBColor(255, 215, 0),
];

/// System name → colour for one set of charts.
#[derive(Debug, Clone, Default)]
pub struct Palette {
    by_system: BTreeMap<String, RGBColor>,
}

impl Palette {
    /// Colours for `systems` (any order, repeats allowed): the i-th name in sorted order gets
    /// the i-th colour; beyond [`COLORS`]'s length the list starts over.
    pub fn for_systems<'a>(systems: impl IntoIterator<Item = &'a str>) -> Palette {
        let mut names: Vec<&str> = systems.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        Palette {
            by_system: names
                .into_iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), COLORS[i % COLORS.len()]))
                .collect(),
        }
    }

    /// `system`'s colour (the first colour for a system the palette was not made for).
    pub fn color(&self, system: &str) -> RGBColor {
        self.by_system.get(system).copied().unwrap_or(COLORS[0])
    }

    /// The `k`-th series of `system` in one chart (another workload, concurrency or thread
    /// count): its colour for `k = 0`, then lighter shades of it.
    pub fn shade(&self, system: &str, k: usize) -> RGBColor {
        let RGBColor(r, g, b) = self.color(system);
        let t = (0.22 * k as f64).min(0.66);
        let mix = |c: u8| (c as f64 + (255.0 - c as f64) * t).round() as u8;
        RGBColor(mix(r), mix(g), mix(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_systems_get_distinct_distinguishable_colours() {
        let names: Vec<String> = (0..16).map(|i| format!("system-{i:02}")).collect();
        let p = Palette::for_systems(names.iter().map(String::as_str));
        let colors: Vec<RGBColor> = names.iter().map(|n| p.color(n)).collect();
        for (i, a) in colors.iter().enumerate() {
            for b in &colors[i + 1..] {
                let d = ((a.0 as f64 - b.0 as f64).powi(2)
                    + (a.1 as f64 - b.1 as f64).powi(2)
                    + (a.2 as f64 - b.2 as f64).powi(2))
                .sqrt();
                assert!(d >= 60.0, "{a:?} and {b:?} are too close ({d:.0})");
            }
        }
    }

    #[test]
    fn a_system_keeps_its_colour_whatever_the_order() {
        let a = Palette::for_systems(["redis", "dmkv-race", "dmkv-clover", "redis"]);
        let b = Palette::for_systems(["dmkv-clover", "redis", "dmkv-race"]);
        for s in ["redis", "dmkv-race", "dmkv-clover"] {
            assert_eq!(a.color(s), b.color(s), "{s}");
        }
        assert_eq!(a.color("dmkv-clover"), COLORS[0]);
        assert_eq!(a.shade("redis", 0), a.color("redis"));
        assert_ne!(a.shade("redis", 1), a.color("redis"));
    }
}
