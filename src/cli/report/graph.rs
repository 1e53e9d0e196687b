//! The flow as a picture: one box per step, coloured by its state, in columns by dependency
//! depth (the longest path from a step with no dependencies), with an arrow from each
//! dependency. Drawn as inline SVG so the page needs no library and no network.

use std::collections::VecDeque;
use std::fmt::Write;

use super::html::{escape, shorten};
use ocflow_core::task::report::StepFacts;

const NODE_WIDTH: usize = 200;
const NODE_HEIGHT: usize = 62;
const COLUMN_GAP: usize = 64;
const ROW_GAP: usize = 18;
const MARGIN: usize = 12;
/// Characters of an id or operation that fit in a box; the tooltip has the rest.
const LABEL_CHARS: usize = 26;

/// For each step, the indexes of the steps it depends on (unknown ids are left out: a flow
/// from another revision may name a step that no longer has a state).
pub(crate) fn dependency_indexes(steps: &[StepFacts]) -> Vec<Vec<usize>> {
    steps
        .iter()
        .map(|step| {
            step.depends_on
                .iter()
                .filter_map(|dep| steps.iter().position(|s| s.status.id == *dep))
                .collect()
        })
        .collect()
}

/// Each step's column: the length of the longest dependency path leading to it, so every
/// arrow points rightwards. Kahn's order keeps it linear in the edges; steps caught in a cycle
/// (impossible in a validated flow, but revisions are mixed here) keep the depth reached.
pub(crate) fn depths(dependencies: &[Vec<usize>]) -> Vec<usize> {
    let count = dependencies.len();
    let mut dependents = vec![Vec::new(); count];
    let mut waiting = vec![0usize; count];
    for (step, deps) in dependencies.iter().enumerate() {
        for &dep in deps {
            dependents[dep].push(step);
            waiting[step] += 1;
        }
    }
    let mut depth = vec![0; count];
    let mut ready: VecDeque<usize> = (0..count).filter(|&s| waiting[s] == 0).collect();
    while let Some(step) = ready.pop_front() {
        for &next in &dependents[step] {
            depth[next] = depth[next].max(depth[step] + 1);
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.push_back(next);
            }
        }
    }
    depth
}

/// Each step's (column, row): its depth, and its place among the steps of that depth in flow
/// order.
pub(crate) fn layout(depths: &[usize]) -> Vec<(usize, usize)> {
    let mut filled = vec![0usize; depths.iter().max().map_or(0, |d| d + 1)];
    depths
        .iter()
        .map(|&column| {
            let row = filled[column];
            filled[column] += 1;
            (column, row)
        })
        .collect()
}

/// The top-left corner of the box at (column, row).
fn corner((column, row): (usize, usize)) -> (usize, usize) {
    (
        MARGIN + column * (NODE_WIDTH + COLUMN_GAP),
        MARGIN + row * (NODE_HEIGHT + ROW_GAP),
    )
}

/// The graph as an `<svg>` element.
pub(crate) fn svg(steps: &[StepFacts]) -> String {
    let dependencies = dependency_indexes(steps);
    let places = layout(&depths(&dependencies));
    let columns = places.iter().map(|p| p.0 + 1).max().unwrap_or(1);
    let rows = places.iter().map(|p| p.1 + 1).max().unwrap_or(1);
    let width = 2 * MARGIN + columns * NODE_WIDTH + (columns - 1) * COLUMN_GAP;
    let height = 2 * MARGIN + rows * NODE_HEIGHT + (rows - 1) * ROW_GAP;
    let mut out = format!(
        "<svg class=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"the flow's steps and their dependencies\">\n<defs><marker id=\"arrow\" \
         viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" \
         orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" class=\"arrowhead\"/>\
         </marker></defs>\n"
    );
    for (step, deps) in dependencies.iter().enumerate() {
        for &dep in deps {
            out.push_str(&edge(corner(places[dep]), corner(places[step])));
        }
    }
    for (step, place) in steps.iter().zip(&places) {
        out.push_str(&node(step, corner(*place)));
    }
    out.push_str("</svg>\n");
    out
}

/// A curve from the right side of the dependency's box to the left side of the step's.
fn edge(from: (usize, usize), to: (usize, usize)) -> String {
    let (x1, y1) = (from.0 + NODE_WIDTH, from.1 + NODE_HEIGHT / 2);
    let (x2, y2) = (to.0, to.1 + NODE_HEIGHT / 2);
    let bend = (x2.saturating_sub(x1)) / 2;
    format!(
        "<path class=\"edge\" d=\"M{x1},{y1} C{},{y1} {},{y2} {x2},{y2}\" \
         marker-end=\"url(#arrow)\"/>\n",
        x1 + bend,
        x2.saturating_sub(bend)
    )
}

/// One step's box: its id, operation, state and role, with everything in the tooltip.
fn node(step: &StepFacts, (x, y): (usize, usize)) -> String {
    let status = &step.status;
    let id = escape(&status.id);
    let state = status.status.to_string();
    let role = step
        .role
        .as_deref()
        .map(|r| format!(" · {r}"))
        .unwrap_or_default();
    let mut tooltip = format!("{} — {} — {state}{role}", status.id, status.operation);
    if let Some(description) = &step.description {
        let _ = write!(tooltip, "\n{description}");
    }
    format!(
        "<g class=\"node {state}\" data-step=\"{id}\" tabindex=\"0\"><title>{}</title>\
         <rect x=\"{x}\" y=\"{y}\" width=\"{NODE_WIDTH}\" height=\"{NODE_HEIGHT}\" rx=\"7\"/>\
         <text x=\"{}\" y=\"{}\" class=\"node-id\">{}</text>\
         <text x=\"{}\" y=\"{}\" class=\"node-op\">{}</text>\
         <text x=\"{}\" y=\"{}\" class=\"node-state\">{}</text></g>\n",
        escape(&tooltip),
        x + 10,
        y + 20,
        escape(&shorten(&status.id, LABEL_CHARS)),
        x + 10,
        y + 37,
        escape(&shorten(&status.operation, LABEL_CHARS)),
        x + 10,
        y + 53,
        escape(&shorten(&format!("{state}{role}"), LABEL_CHARS + 4)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_the_longest_path_from_a_root() {
        // a → b → c, a → c (c is two deep, not one), d alone, e needs c and d.
        let dependencies = vec![vec![], vec![0], vec![0, 1], vec![], vec![2, 3]];
        assert_eq!(depths(&dependencies), vec![0, 1, 2, 0, 3]);
        assert_eq!(
            layout(&depths(&dependencies)),
            vec![(0, 0), (1, 0), (2, 0), (0, 1), (3, 0)]
        );
    }

    #[test]
    fn a_diamond_puts_its_sides_in_one_column_in_flow_order() {
        let dependencies = vec![vec![], vec![0], vec![0], vec![1, 2]];
        assert_eq!(
            layout(&depths(&dependencies)),
            vec![(0, 0), (1, 0), (1, 1), (2, 0)]
        );
    }

    #[test]
    fn a_cycle_does_not_hang_and_no_steps_is_no_columns() {
        assert_eq!(depths(&[vec![1], vec![0], vec![]]), vec![0, 0, 0]);
        assert_eq!(layout(&[]), Vec::<(usize, usize)>::new());
    }
}
