//! The picture `simulate --svg` draws: one bar per node, coolest before the burst first, the
//! CPU the burst adds without the webhook (left half) and with it (right half), the level ideal
//! water-filling reaches, the nodes that could not take a pod, and the hot threshold.

use std::error::Error;

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Bar, Report};
use crate::scheduler::Unfit;

const BEFORE: RGBColor = RGBColor(150, 150, 150);
const WITHOUT: RGBColor = RGBColor(214, 69, 65);
const WITH: RGBColor = RGBColor(38, 110, 191);
const IDEAL: RGBColor = RGBColor(20, 120, 50);
/// A node that could not take a pod: a pale bar with a cross over it.
const UNFIT: RGBColor = RGBColor(228, 228, 228);
const UNFIT_MARK: RGBColor = RGBColor(80, 80, 80);
/// A node whose NIC was hot before the burst: a triangle above its bar.
const NIC_HOT: RGBColor = RGBColor(230, 140, 20);
/// The legend entry of those nodes.
const NIC_HOT_ENTRY: &str = "NIC hot before the burst (the webhook avoids it)";

const HEIGHT: u32 = 480;
/// Font sizes as plotters takes them (the SVG's are 1/1.24 of these).
const TITLE_SIZE: f64 = 20.0;
const SUBTITLE_SIZE: f64 = 15.0;
const LABEL_SIZE: f64 = 13.0;
const LEGEND_SIZE: f64 = 14.0;
/// The average width of a sans-serif character, in ems, generously: text sized with it fits.
const CHAR_EM: f64 = 0.62;
const MARGIN: u32 = 10;
const Y_LABEL_AREA: u32 = 60;
/// The narrowest slot per node that still takes its name, rotated, under the bar.
const NAMED_SLOT_PX: f64 = 13.0;
/// Node names longer than this are shortened in the middle.
const NAME_CHARS: usize = 22;

/// The picture as SVG text.
pub fn svg(report: &Report) -> Result<String, String> {
    let mut out = String::new();
    draw(report, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Width of `text` drawn at plotters font `size`, in pixels, as a browser shows it (at most).
fn text_px(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * CHAR_EM * size / 1.24
}

fn percent(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

fn title(report: &Report) -> String {
    format!(
        "Real CPU per node before and after a burst of {} TaskManagers",
        report.pods
    )
}

/// The scenario in one line: nodes, pods, replicas, bind lag, split.
fn subtitle(report: &Report) -> String {
    let mut nodes = format!("{} nodes", report.nodes);
    if report.unfit_nodes > 0 {
        nodes += &format!(" ({} could not take a pod)", report.unfit_nodes);
    }
    let mut pods = format!("{} pods of {} cores", report.pods, report.pod_cpu_cores);
    if report.pod_network_bytes_per_second > 0.0 {
        pods += &format!(" and {} MB/s", report.pod_network_bytes_per_second / 1e6);
    }
    let s = &report.scenario;
    let mut webhook = match s.replicas {
        1 => "1 webhook replica".to_string(),
        r => format!("{r} webhook replicas"),
    };
    if let Some(share) = s.first_share {
        webhook += &format!(" ({} of the reviews to one)", percent(share));
    }
    if s.one_decider {
        webhook += ", one deciding";
    }
    format!(
        "{nodes}, {pods}, {webhook}, bind lag {}ms, hot at {} CPU",
        s.bind_lag_ms,
        percent(report.hot_cpu)
    )
}

/// What a node that could not take the pod is marked with.
fn why(unfit: Unfit) -> &'static str {
    match unfit {
        Unfit::Unschedulable => "cordoned",
        Unfit::Taint => "tainted",
        Unfit::NodeAffinity => "not selected",
        Unfit::Resources => "full",
        Unfit::TopologySpread(_) => "spread",
        Unfit::InterPodAffinity(_) => "pod affinity",
    }
}

/// A node name short enough to stand under its bar: long ones keep their start and their end.
fn short_name(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= NAME_CHARS {
        return name.to_string();
    }
    let head: String = chars[..9].iter().collect();
    let tail: String = chars[chars.len() - (NAME_CHARS - 10)..].iter().collect();
    format!("{head}…{tail}")
}

/// Where the x axis has ticks when nodes are too many to name: ranks (1 = coolest) at least
/// `min_px` apart, as 0-based bar positions.
fn rank_ticks(n: usize, plot_px: f64, min_px: f64) -> Vec<usize> {
    let raw = n as f64 * min_px / plot_px.max(1.0);
    let mut step = 1;
    'nice: for scale in [1, 10, 100, 1000, 10_000, 100_000] {
        for m in [1, 2, 5] {
            if (m * scale) as f64 >= raw {
                step = m * scale;
                break 'nice;
            }
        }
    }
    let ranks: Vec<usize> = if step <= 2 {
        (1..=n).step_by(step).collect()
    } else {
        std::iter::once(1).chain((step..=n).step_by(step)).collect()
    };
    ranks.into_iter().map(|r| r - 1).collect()
}

/// The x axis: bar `i` centred on `i`, ticks only where `ticks` says (whole nodes).
#[derive(Clone)]
struct Nodes {
    n: usize,
    ticks: Vec<f64>,
}

impl Ranged for Nodes {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = (value + 0.5) / self.n.max(1) as f64;
        limit.0 + (f64::from(limit.1 - limit.0) * share).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        -0.5..self.n as f64 - 0.5
    }
}

/// The legend's entries, in order.
fn legend(report: &Report) -> Vec<String> {
    let mut entries = vec![
        "CPU before the burst".to_string(),
        "added without the webhook".to_string(),
        "added with the webhook".to_string(),
        "ideal water-filling (CPU and NIC; no mark: no pod there)".to_string(),
        format!("hot threshold ({} CPU)", percent(report.hot_cpu)),
    ];
    let mut reasons: Vec<&str> = Vec::new();
    for reason in report.bars.iter().filter_map(|b| b.unfit).map(why) {
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    if !reasons.is_empty() {
        entries.push(format!("could not take a pod: {}", reasons.join(", ")));
    }
    if report.bars.iter().any(|b| b.nic_hot && b.unfit.is_none()) {
        entries.push(NIC_HOT_ENTRY.to_string());
    }
    entries
}

/// The legend box in pixels as plotters lays it out (its text estimate, its 30 px of symbol,
/// 10 px margins, 5 px from the corner), with some room to spare.
fn legend_px(entries: &[String]) -> (f64, f64) {
    let em = LEGEND_SIZE / 1.24 / 1.24;
    let text = entries
        .iter()
        .map(|e| (em * 0.7 * e.chars().count() as f64).max(text_px(e, LEGEND_SIZE)))
        .fold(0.0, f64::max);
    let w = text + 30.0 + 20.0 + 5.0;
    // Lines are 1.25 font sizes apart; the last one is as tall as its estimate.
    let h = entries.len().saturating_sub(1) as f64 * LEGEND_SIZE * 1.25
        + LEGEND_SIZE / 1.24
        + 20.0
        + 5.0;
    (w + 10.0, h + 8.0)
}

/// Room the triangle above a NIC-hot node's bar takes, in pixels.
const NIC_MARK_PX: f64 = 14.0;

/// The top of the y axis: every bar (and the marks above the nodes that could not take a pod)
/// below it, and the ones under the legend (upper left) below the legend.
fn y_top(report: &Report, plot: (f64, f64), legend: (f64, f64), mark_px: f64) -> f64 {
    let n = report.bars.len().max(1) as f64;
    let slot = plot.0 / n;
    let mut top = report
        .bars
        .iter()
        .map(|b| b.cpu_before + b.added_without.max(b.added_with).max(b.added_ideal))
        .fold(report.hot_cpu.max(1.0), f64::max)
        * 1.05;
    for (i, b) in report.bars.iter().enumerate() {
        let height = b.cpu_before + b.added_without.max(b.added_with).max(b.added_ideal);
        let above = if b.unfit.is_some() {
            mark_px
        } else if b.nic_hot {
            NIC_MARK_PX
        } else {
            0.0
        };
        let under_legend = (i as f64) * slot < legend.0;
        let room = plot.1 - above - if under_legend { legend.1 } else { 0.0 };
        if room > plot.1 / 4.0 {
            top = top.max(height * plot.1 / room);
        }
    }
    top
}

fn draw(report: &Report, out: &mut String) -> Result<(), Box<dyn Error>> {
    let bars: &[Bar] = &report.bars;
    let n = bars.len().max(1);
    let title = title(report);
    let subtitle = subtitle(report);
    let hot_label = format!("hot {}", percent(report.hot_cpu));
    let label_font = ("sans-serif", LABEL_SIZE).into_font();
    let text_at = |h: HPos, turned: bool| {
        let style = TextStyle::from(label_font.clone()).pos(Pos::new(h, VPos::Center));
        if turned {
            style.transform(FontTransform::Rotate270)
        } else {
            style
        }
    };
    let right_margin = (text_px(&hot_label, LABEL_SIZE) + 2.0 * MARGIN as f64).ceil() as u32;
    let per_node = if n <= 120 { 14 } else { 4 };
    let width = ((n * per_node + 200) as u32)
        .clamp(800, 4000)
        .max((text_px(&title, TITLE_SIZE) + 4.0 * MARGIN as f64).ceil() as u32)
        .max((text_px(&subtitle, SUBTITLE_SIZE) + 4.0 * MARGIN as f64).ceil() as u32);
    let plot_w = f64::from(width - MARGIN - Y_LABEL_AREA - right_margin);
    let named = plot_w / n as f64 >= NAMED_SLOT_PX;
    let names: Vec<String> = bars.iter().map(|b| short_name(&b.node)).collect();
    let x_desc_px = 18.0;
    let x_label_area = if named {
        let longest = names
            .iter()
            .map(|name| text_px(name, LABEL_SIZE))
            .fold(0.0, f64::max);
        (longest + 10.0 + x_desc_px).ceil() as u32
    } else {
        (LABEL_SIZE + 10.0 + x_desc_px).ceil() as u32
    };
    let entries = legend(report);
    let reason_px = if named {
        bars.iter()
            .filter_map(|b| b.unfit)
            .map(|u| text_px(why(u), LABEL_SIZE))
            .fold(0.0, f64::max)
    } else {
        0.0
    };
    let mark_px = 14.0 + reason_px;

    let root = SVGBackend::with_string(out, (width, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let area = root.titled(&title, ("sans-serif", TITLE_SIZE))?.titled(
        &subtitle,
        ("sans-serif", SUBTITLE_SIZE)
            .into_font()
            .color(&BLACK.mix(0.75)),
    )?;
    let ticks: Vec<f64> = if named {
        (0..bars.len()).map(|i| i as f64).collect()
    } else {
        rank_ticks(bars.len(), plot_w, 40.0)
            .into_iter()
            .map(|i| i as f64)
            .collect()
    };
    let x_range = || Nodes {
        n,
        ticks: ticks.clone(),
    };
    let builder = |top: f64| {
        ChartBuilder::on(&area)
            .margin(MARGIN)
            .margin_right(right_margin)
            .x_label_area_size(x_label_area)
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d(x_range(), 0f64..top)
    };
    let (plot_w, plot_h) = builder(1.0)?.plotting_area().dim_in_pixel();
    let top = y_top(
        report,
        (f64::from(plot_w), f64::from(plot_h)),
        legend_px(&entries),
        mark_px,
    );
    let mut chart = builder(top)?;

    let x_label_style = if named {
        // The names are drawn rotated below; the mesh draws only the ticks.
        label_font.color(&TRANSPARENT)
    } else {
        label_font.color(&BLACK)
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(if named {
            "nodes, coolest before the burst first"
        } else {
            "nodes by CPU before the burst (1 = coolest)"
        })
        .y_desc("real CPU")
        .x_label_style(x_label_style)
        .y_label_style(label_font.clone())
        .axis_desc_style(label_font.clone())
        .x_label_formatter(&|v| format!("{}", v.round() as i64 + 1))
        .y_label_formatter(&|v| percent(*v))
        .draw()?;

    let span = |i: usize, from: f64, to: f64| (i as f64 + from, i as f64 + to);
    let rect = |(x0, x1): (f64, f64), y0: f64, y1: f64, style: ShapeStyle| {
        Rectangle::new([(x0, y0), (x1, y1)], style)
    };
    let swatch = |color: RGBColor| {
        move |(x, y): (i32, i32)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], color.filled())
    };
    chart
        .draw_series(
            bars.iter()
                .enumerate()
                .filter(|(_, b)| b.unfit.is_none() && b.cpu_before > 0.0)
                .map(|(i, b)| rect(span(i, -0.4, 0.4), 0.0, b.cpu_before, BEFORE.filled())),
        )?
        .label(&entries[0])
        .legend(swatch(BEFORE));
    for (entry, color, from, to, added) in [
        (
            &entries[1],
            WITHOUT,
            -0.4,
            0.0,
            (|b: &Bar| b.added_without) as fn(&Bar) -> f64,
        ),
        (&entries[2], WITH, 0.0, 0.4, |b: &Bar| b.added_with),
    ] {
        chart
            .draw_series(
                bars.iter()
                    .enumerate()
                    .filter(|(_, b)| added(b) > 0.0)
                    .map(|(i, b)| {
                        rect(
                            span(i, from, to),
                            b.cpu_before,
                            b.cpu_before + added(b),
                            color.filled(),
                        )
                    }),
            )?
            .label(entry)
            .legend(swatch(color));
    }
    let ideal_style = IDEAL.stroke_width(3);
    chart
        .draw_series(
            bars.iter()
                .enumerate()
                .filter(|(_, b)| b.added_ideal > 0.0)
                .map(|(i, b)| {
                    let y = b.cpu_before + b.added_ideal;
                    let (x0, x1) = span(i, -0.45, 0.45);
                    PathElement::new(vec![(x0, y), (x1, y)], ideal_style)
                }),
        )?
        .label(&entries[3])
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], ideal_style));
    let hot = report.hot_cpu;
    chart
        .draw_series(LineSeries::new(
            [(-0.5, hot), (n as f64 - 0.5, hot)],
            BLACK.stroke_width(2),
        ))?
        .label(&entries[4])
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2)));
    if let Some(entry) = entries.get(5).filter(|e| e.as_str() != NIC_HOT_ENTRY) {
        let unfit: Vec<(usize, &Bar, Unfit)> = bars
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Some((i, b, b.unfit?)))
            .collect();
        chart.draw_series(
            unfit
                .iter()
                .filter(|(_, b, _)| b.cpu_before > 0.0)
                .map(|&(i, b, _)| rect(span(i, -0.4, 0.4), 0.0, b.cpu_before, UNFIT.filled())),
        )?;
        chart.draw_series(unfit.iter().map(|&(i, b, _)| {
            rect(
                span(i, -0.4, 0.4),
                0.0,
                b.cpu_before,
                BEFORE.stroke_width(1),
            )
        }))?;
        let mark = UNFIT_MARK.stroke_width(2);
        chart
            .draw_series(unfit.iter().map(|&(i, b, _)| {
                EmptyElement::at((i as f64, b.cpu_before)) + Cross::new((0, -8), 4, mark)
            }))?
            .label(entry)
            .legend(move |(x, y)| {
                EmptyElement::at((x + 8, y))
                    + Rectangle::new([(-8, -5), (8, 5)], UNFIT.filled())
                    + Rectangle::new([(-8, -5), (8, 5)], BEFORE.stroke_width(1))
                    + Cross::new((0, 0), 4, mark)
            });
        if named {
            let style = text_at(HPos::Left, true).color(&UNFIT_MARK);
            for &(i, b, reason) in &unfit {
                let (x, y) = chart.backend_coord(&(i as f64, b.cpu_before));
                root.draw(&Text::new(why(reason), (x, y - 16), style.clone()))?;
            }
        }
    }
    if entries.last().is_some_and(|e| e == NIC_HOT_ENTRY) {
        let triangle = |(x, y): (i32, i32)| {
            Polygon::new(
                vec![(x - 5, y - 9), (x + 5, y - 9), (x, y - 1)],
                NIC_HOT.filled(),
            )
        };
        chart
            .draw_series(
                bars.iter()
                    .enumerate()
                    .filter(|(_, b)| b.nic_hot && b.unfit.is_none())
                    .map(|(i, b)| {
                        let top =
                            b.cpu_before + b.added_without.max(b.added_with).max(b.added_ideal);
                        EmptyElement::at((i as f64, top)) + triangle((0, -2))
                    }),
            )?
            .label(NIC_HOT_ENTRY)
            .legend(move |(x, y)| EmptyElement::at((x + 8, y + 5)) + triangle((0, 0)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", LEGEND_SIZE))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .draw()?;

    // The threshold's value at the line's right end, outside the bars.
    let (x, y) = chart.backend_coord(&(n as f64 - 0.5, hot));
    root.draw(&Text::new(
        hot_label,
        (x + 6, y),
        text_at(HPos::Left, false),
    ))?;
    if named {
        // Node names under their bars, read bottom to top.
        let style = text_at(HPos::Right, true);
        for (i, name) in names.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(i as f64, 0.0));
            root.draw(&Text::new(name.as_str(), (x, y + 8), style.clone()))?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::simulate::Scenario;

    fn bar(node: &str, before: f64, unfit: Option<Unfit>) -> Bar {
        Bar {
            node: node.into(),
            cpu_before: before,
            added_without: if unfit.is_none() { 0.25 } else { 0.0 },
            added_with: if unfit.is_none() { 0.125 } else { 0.0 },
            added_ideal: if unfit.is_none() { 0.125 } else { 0.0 },
            unfit,
            nic_hot: false,
        }
    }

    #[test]
    fn nodes_with_a_hot_nic_are_marked() {
        let mut hot = bar("hot-nic", 0.08, None);
        hot.nic_hot = true;
        let r = report(vec![bar("a", 0.1, None), hot]);
        assert_eq!(legend(&r).last().map(String::as_str), Some(NIC_HOT_ENTRY));
        let text = svg(&r).expect("svg");
        let doc = roxmltree::Document::parse(&text).expect("SVG is XML");
        let orange = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "polygon")
            .filter(|n| n.attribute("fill") == Some("#E68C14"))
            .count();
        // The mark over the node and its legend swatch.
        assert_eq!(orange, 2, "{text}");
        assert!(text.contains(NIC_HOT_ENTRY));
        // Without such a node: no mark, no entry.
        let text = svg(&report(vec![bar("a", 0.1, None)])).expect("svg");
        assert!(!text.contains("NIC hot"), "{text}");
    }

    fn report(bars: Vec<Bar>) -> Report {
        Report {
            nodes: bars.len(),
            pods: 12,
            pod_cpu_cores: 2.0,
            pod_network_bytes_per_second: 0.0,
            hot_cpu: 0.85,
            unfit_nodes: bars.iter().filter(|b| b.unfit.is_some()).count(),
            scenario: Scenario {
                replicas: 2,
                bind_lag_ms: 10.0,
                first_share: Some(0.8),
                one_decider: false,
            },
            methods: Vec::new(),
            bars,
        }
    }

    #[test]
    fn the_subtitle_says_the_scenario() {
        let r = report(vec![
            bar("a", 0.1, None),
            bar("b", 0.2, Some(Unfit::Unschedulable)),
        ]);
        assert_eq!(
            subtitle(&r),
            "2 nodes (1 could not take a pod), 12 pods of 2 cores, 2 webhook replicas \
             (80% of the reviews to one), bind lag 10ms, hot at 85% CPU"
        );
    }

    #[test]
    fn the_legend_names_only_the_reasons_present() {
        let r = report(vec![
            bar("a", 0.1, Some(Unfit::Taint)),
            bar("b", 0.2, Some(Unfit::Resources)),
            bar("c", 0.3, Some(Unfit::Taint)),
        ]);
        assert_eq!(
            legend(&r).last().map(String::as_str),
            Some("could not take a pod: tainted, full")
        );
        assert_eq!(legend(&report(vec![bar("a", 0.1, None)])).len(), 5);
    }

    #[test]
    fn long_names_keep_their_ends() {
        assert_eq!(short_name("worker-01"), "worker-01");
        let long = "ip-10-0-12-34.eu-west-1.compute.internal";
        let short = short_name(long);
        assert_eq!(short.chars().count(), NAME_CHARS);
        assert!(short.starts_with("ip-10-0-1") && short.ends_with("ute.internal"));
    }

    #[test]
    fn rank_ticks_are_whole_ranks_far_enough_apart() {
        assert_eq!(rank_ticks(5, 500.0, 40.0), vec![0, 1, 2, 3, 4]);
        let ticks = rank_ticks(1000, 3700.0, 40.0);
        assert_eq!(&ticks[..3], &[0, 19, 39]);
        assert_eq!(ticks.last(), Some(&999));
    }

    #[test]
    fn the_legend_stays_above_the_bars_under_it() {
        let mut r = report(vec![bar("a", 0.9, None), bar("b", 0.1, None)]);
        let plot = (600.0, 300.0);
        let legend = (300.0, 100.0);
        let top = y_top(&r, plot, legend, 0.0);
        // The first bar (1.15) sits under the legend: it stays below the legend's bottom.
        assert!(1.15 / top <= (300.0 - 100.0) / 300.0 + 1e-9, "{top}");
        r.bars.swap(0, 1);
        assert!((y_top(&r, plot, legend, 0.0) - 1.15 * 1.05).abs() < 1e-9);
    }

    #[test]
    fn every_text_fits_the_canvas() {
        let mut bars: Vec<Bar> = (0..300)
            .map(|i| bar(&format!("a-rather-long-node-name-{i:04}"), 0.3, None))
            .collect();
        bars[7].unfit = Some(Unfit::NodeAffinity);
        let svg = svg(&report(bars)).expect("draws");
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .expect("width");
        for text in svg.split("<text").skip(1) {
            let attr = |name: &str| {
                text.split(&format!(" {name}=\""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .unwrap_or_default()
                    .to_string()
            };
            if text.contains("transform=") {
                continue;
            }
            let content = text.split('>').nth(1).unwrap_or_default().trim();
            let content = content.trim_end_matches("</text").trim();
            let x: f64 = attr("x").parse().expect("x");
            let size: f64 = attr("font-size").parse().expect("size");
            let w = content.chars().count() as f64 * CHAR_EM * size;
            let (from, to) = match attr("text-anchor").as_str() {
                "middle" => (x - w / 2.0, x + w / 2.0),
                "end" => (x - w, x),
                _ => (x, x + w),
            };
            assert!(
                from >= 0.0 && to <= width,
                "{content:?} spans {from}..{to} of {width}"
            );
        }
    }
}
