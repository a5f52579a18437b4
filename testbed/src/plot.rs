//! SVG line charts for the benchmark programs' results pages (plotters' SVG backend
//! only: no font or image libraries are built, text is left to the viewer).

use std::path::Path;

use plotters::prelude::*;

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
];

/// A chart a program wrote beside its results page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Its file name (in the page's directory).
    pub file: String,
    /// What it shows.
    pub title: String,
}

/// The results page's section linking `charts` (empty when there are none).
pub fn charts_section(charts: &[Written]) -> String {
    if charts.is_empty() {
        return String::new();
    }
    let mut s = String::from("## charts\n\n");
    for c in charts {
        s.push_str(&format!("- [{}]({})\n", c.title, c.file));
    }
    s.push('\n');
    s
}

/// The directory a program writes its charts to: `explicit`, else the directory of
/// its results page, else none.
pub fn chart_dir(
    explicit: Option<&std::path::Path>,
    results_md: Option<&std::path::Path>,
) -> Option<std::path::PathBuf> {
    explicit.map(std::path::PathBuf::from).or_else(|| {
        results_md.map(|p| p.parent().map(std::path::PathBuf::from).unwrap_or_default())
    })
}

/// Draw `series` as `chart` into `dir/file` and say so for the results page.
pub fn write_chart(
    dir: &std::path::Path,
    file: &str,
    chart: &Chart<'_>,
    series: &[Series],
) -> Result<Written, String> {
    line_chart(&dir.join(file), chart, series)?;
    Ok(Written {
        file: file.to_owned(),
        title: chart.title.to_owned(),
    })
}

/// One line of a chart.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// A chart with a log2 x axis (labels 2^x) and a linear y axis.
pub struct Chart<'a> {
    /// Title.
    pub title: &'a str,
    /// x axis description.
    pub x_desc: &'a str,
    /// y axis description.
    pub y_desc: &'a str,
    /// Plot x as log2(x).
    pub log2_x: bool,
}

/// Draw `series` into an SVG file at `path`.
pub fn line_chart(path: &Path, c: &Chart<'_>, series: &[Series]) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let tx = |x: f64| if c.log2_x { x.max(1e-9).log2() } else { x };
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| tx(p.0)));
    let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (lo, hi) = if lo > hi {
        (0.0, 1.0)
    } else {
        (lo, hi.max(lo + 1.0))
    };
    let max_y = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.35;
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(c.title, ("sans-serif", 24))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(100)
        .build_cartesian_2d(lo - 0.25..hi + 0.25, 0f64..max_y)
        .map_err(|e| e.to_string())?;
    let log2 = c.log2_x;
    chart
        .configure_mesh()
        .x_desc(c.x_desc)
        .y_desc(c.y_desc)
        .x_label_formatter(&|x| {
            if log2 {
                format!("{:.0}", 2f64.powf(*x))
            } else {
                format!("{x:.0}")
            }
        })
        .y_label_formatter(&|y| y_label(*y))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let col = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (tx(x), y)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{}   ", s.label))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// A y axis label: whole numbers from 100 up, three significant digits below.
fn y_label(y: f64) -> String {
    if y.abs() >= 100.0 {
        format!("{y:.0}")
    } else if y == 0.0 {
        "0".to_owned()
    } else {
        let digits = (2 - y.abs().log10().floor() as i32).clamp(0, 6) as usize;
        format!("{y:.digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_readable() {
        assert_eq!(y_label(123456.7), "123457");
        assert_eq!(y_label(12.345), "12.3");
        assert_eq!(y_label(0.01234), "0.0123");
        assert_eq!(y_label(0.0), "0");
    }

    #[test]
    fn a_chart_is_written_with_every_series() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("sub").join("c.svg");
        let series = vec![
            Series {
                label: "first".into(),
                points: vec![(1.0, 10.0), (2.0, 20.0), (4.0, 15.0)],
            },
            Series {
                label: "second".into(),
                points: vec![(1.0, 5.0), (4.0, 30.0)],
            },
        ];
        let chart = Chart {
            title: "t",
            x_desc: "x",
            y_desc: "y",
            log2_x: true,
        };
        line_chart(&path, &chart, &series).expect("chart");
        let svg = std::fs::read_to_string(&path).expect("svg");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("first") && svg.contains("second"));
        // Nothing to draw is still a chart.
        line_chart(&path, &chart, &[]).expect("empty chart");
    }
}
