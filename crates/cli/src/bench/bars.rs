//! SVG bar charts of benchmark tables: for each row of a table (a
//! benchmark, a step, an operation), read across, one bar per series, measured here
//! and, where the paper gives a number, the paper's beside it, told
//! apart by colour and named in the legend. Values span orders of
//! magnitude (today's nanoseconds against a 1990s adapter's
//! microseconds), so the value axis may be logarithmic.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use super::plot::COLORS;

type Res<T> = Result<T, String>;

/// One series: a value per category, `None` where it has none (the
/// paper gives no number, or the row was not measured).
pub struct Bars {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// A bar chart: categories down the side, a group of bars at each.
pub struct BarChart<'a> {
    pub title: &'a str,
    /// What the values are (the value axis' label).
    pub y_desc: &'a str,
    pub categories: Vec<String>,
    pub series: Vec<Bars>,
    /// A logarithmic value axis (values at or below 0 are left out).
    pub log: bool,
}

/// Writes `c` as an SVG file at `path`.
pub fn write_bars_svg(c: &BarChart, path: &Path) -> Res<()> {
    let values: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .filter(|v| v.is_finite() && (!c.log || *v > 0.0))
        .collect();
    if values.is_empty() || c.categories.is_empty() {
        return Err(format!("{}: nothing to plot", c.title));
    }
    let lo = values.iter().copied().fold(f64::MAX, f64::min);
    let hi = values.iter().copied().fold(f64::MIN, f64::max);
    let r = if c.log {
        draw(c, path, (lo / 2.0..hi * 8.0).log_scale(), lo / 2.0)
    } else {
        draw(c, path, 0.0..(hi * 1.4).max(f64::MIN_POSITIVE), 0.0)
    };
    r.map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Draws `c` with the categories down the y axis (their names read
/// across) and the values along `x`, bars starting at `floor`.
fn draw<X>(c: &BarChart, path: &Path, x: X, floor: f64) -> Result<(), Box<dyn Error>>
where
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let n = c.categories.len();
    let k = c.series.len().max(1);
    let height = (120 + 11 * (n * k) as u32 + 10 * n as u32).clamp(360, 2400);
    let label_w = c.categories.iter().map(|s| s.len()).max().unwrap_or(8) as u32 * 7 + 16;
    let root = SVGBackend::new(path, (960, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(c.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(label_w.min(420))
        .build_cartesian_2d(x, 0.0..n as f64)?;
    // The first category at the top.
    let names = c.categories.clone();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n * 2 + 1)
        .y_label_formatter(&move |y| {
            // A label at the middle of each group.
            let j = y.floor();
            if (y - j - 0.5).abs() < 1e-6 && j >= 0.0 && (j as usize) < names.len() {
                names[names.len() - 1 - j as usize].clone()
            } else {
                String::new()
            }
        })
        .x_desc(c.y_desc)
        .draw()?;
    let w = 0.8 / k as f64;
    for (j, s) in c.series.iter().enumerate() {
        let col = COLORS[j % COLORS.len()];
        let rects = s.values.iter().enumerate().filter_map(|(i, v)| {
            let v = (*v)?;
            (v.is_finite() && v > floor).then(|| {
                let top = (n - i) as f64 - 0.1 - w * j as f64;
                Rectangle::new([(floor, top), (v, top - w * 0.9)], col.filled())
            })
        });
        chart
            .draw_series(rects)?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], col.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svg_of(c: &BarChart, tag: &str) -> Res<String> {
        crate::bench::plot::written_svg(&format!("bars-{tag}"), |p| write_bars_svg(c, p))
    }

    #[test]
    fn a_table_becomes_bars_with_its_categories_and_series() {
        let c = BarChart {
            title: "Figure 7: test",
            y_desc: "us",
            categories: vec!["dma_setup".into(), "tx_push".into()],
            series: vec![
                Bars {
                    name: "measured".into(),
                    values: vec![Some(0.02), Some(0.01)],
                },
                Bars {
                    name: "paper".into(),
                    values: vec![Some(11.8), None],
                },
            ],
            log: true,
        };
        let text = svg_of(&c, "log").unwrap();
        assert!(text.starts_with("<svg"));
        for s in [
            "Figure 7: test",
            "dma_setup",
            "tx_push",
            "measured",
            "paper",
        ] {
            assert!(text.contains(s), "{s} missing");
        }
        // Three bars and two legend boxes.
        assert!(text.matches("<rect").count() >= 5);
        let nothing = BarChart {
            series: vec![Bars {
                name: "none".into(),
                values: vec![None, Some(0.0)],
            }],
            ..c
        };
        assert!(svg_of(&nothing, "log-empty").is_err());
    }
}
