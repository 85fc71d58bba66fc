//! SVG plots of benchmark figures: lines measured here, and the paper's
//! own numbers as points beside them, on log-log axes (message sizes span
//! four orders of magnitude, and the paper's hardware is far slower) or on
//! linear axes from 0 (skews and percentages).

use std::error::Error;
use std::path::Path;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

type Res<T> = Result<T, String>;

/// One named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A figure: a title, axis descriptions, measured lines and the paper's
/// points.
pub struct Figure<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub lines: Vec<Series>,
    pub paper: Vec<Series>,
    pub scale: Scale,
}

/// How a figure's axes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Log-log, from half the smallest point to twice the largest on each
    /// axis (points at or below 0 left out); the legend at the lower right.
    LogLog,
    /// Linear from 0 to a little beyond the largest point (at least 1);
    /// the legend at the upper left.
    Linear,
}

/// The series' colours, in order (also the bar charts').
pub(super) const COLORS: [RGBColor; 8] = [
    RGBColor(0, 0, 0),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// Writes `f` as an SVG file at `path`.
pub fn write_svg(f: &Figure, path: &Path) -> Res<()> {
    let all = f
        .lines
        .iter()
        .chain(&f.paper)
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| x.is_finite() && y.is_finite());
    let r = match f.scale {
        Scale::LogLog => {
            let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
            for &(x, y) in all.filter(|(x, y)| *x > 0.0 && *y > 0.0) {
                x0 = x0.min(x);
                x1 = x1.max(x);
                y0 = y0.min(y);
                y1 = y1.max(y);
            }
            if x0 > x1 {
                return Err(format!("{}: nothing to plot", f.title));
            }
            draw(
                f,
                path,
                (x0 / 2.0..x1 * 2.0).log_scale(),
                (y0 / 2.0..y1 * 2.0).log_scale(),
                SeriesLabelPosition::LowerRight,
            )
        }
        Scale::Linear => {
            let (mut x1, mut y1, mut any) = (0.0f64, 0.0f64, false);
            for &(x, y) in all {
                x1 = x1.max(x);
                y1 = y1.max(y);
                any = true;
            }
            if !any {
                return Err(format!("{}: nothing to plot", f.title));
            }
            draw(
                f,
                path,
                0.0..(x1 * 1.05).max(1.0),
                0.0..(y1 * 1.1).max(1.0),
                SeriesLabelPosition::UpperLeft,
            )
        }
    };
    r.map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Draws `f` at `path` on the axes `x` and `y`, its legend at `legend`.
fn draw<X, Y>(
    f: &Figure,
    path: &Path,
    x: X,
    y: Y,
    legend: SeriesLabelPosition,
) -> Result<(), Box<dyn Error>>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let root = SVGBackend::new(path, (800, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(f.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(f.x_desc)
        .y_desc(f.y_desc)
        .draw()?;
    for (i, s) in f.lines.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
    }
    for (i, s) in f.paper.iter().enumerate() {
        let c = COLORS[(i + 1) % COLORS.len()];
        chart
            .draw_series(
                s.points
                    .iter()
                    .map(|&p| TriangleMarker::new(p, 7, c.stroke_width(2))),
            )?
            .label(s.name.as_str())
            .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 6, c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// What `write` writes at a path in a directory of its own (`tag`), read
/// back (for the plots' tests).
#[cfg(test)]
pub(super) fn written_svg(tag: &str, write: impl FnOnce(&Path) -> Res<()>) -> Res<String> {
    let dir = std::env::temp_dir().join(format!("unet-plot-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.svg");
    let r = write(&path).map(|()| std::fs::read_to_string(&path).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` written by `write_svg` into a directory of its own (`tag`), and
    /// read back.
    fn svg_of(f: &Figure, tag: &str) -> Res<String> {
        written_svg(tag, |p| write_svg(f, p))
    }

    #[test]
    fn a_figure_becomes_an_svg_with_its_title_and_series() {
        let f = Figure {
            title: "Figure 9: test",
            x_desc: "bytes",
            y_desc: "us",
            lines: vec![Series {
                name: "measured".into(),
                points: vec![(4.0, 1.0), (4096.0, 3.0)],
            }],
            paper: vec![Series {
                name: "paper".into(),
                points: vec![(4.0, 18.0)],
            }],
            scale: Scale::LogLog,
        };
        let text = svg_of(&f, "log").unwrap();
        assert!(text.starts_with("<svg"));
        assert!(text.contains("Figure 9: test"));
        assert!(text.contains("measured") && text.contains("paper"));
        let empty = Figure {
            lines: vec![],
            paper: vec![],
            ..f
        };
        assert!(svg_of(&empty, "log-empty").is_err());
    }

    #[test]
    fn a_linear_figure_takes_points_at_zero() {
        let f = Figure {
            title: "Figure 7: test",
            x_desc: "skew (% of a time slice)",
            y_desc: "messages buffered (%)",
            lines: vec![Series {
                name: "synth-1".into(),
                points: vec![(0.0, 0.0), (1.0, 12.5)],
            }],
            paper: vec![],
            scale: Scale::Linear,
        };
        let text = svg_of(&f, "linear").unwrap();
        assert!(text.starts_with("<svg"));
        assert!(text.contains("Figure 7: test") && text.contains("synth-1"));
        let nothing = Figure {
            lines: vec![Series {
                name: "nan".into(),
                points: vec![(f64::NAN, 1.0)],
            }],
            ..f
        };
        assert!(svg_of(&nothing, "linear-nan").is_err());
    }
}
