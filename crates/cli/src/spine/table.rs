//! The tables `unet spine` and `unet stat` print of SPINE's listings: a
//! heading and a row per entry, each column aligned to its width, the
//! last one free text (drops or terminations as `name count` pairs).

/// A column: its heading, its width, and whether it is aligned left.
pub struct Col(pub &'static str, pub usize, pub bool);

/// A column aligned right.
pub const fn right(head: &'static str, width: usize) -> Col {
    Col(head, width, false)
}

/// A column aligned left.
pub const fn left(head: &'static str, width: usize) -> Col {
    Col(head, width, true)
}

/// A table's shape: the indent, the aligned columns and the heading of
/// the last, free, column (two spaces after the others).
pub struct Table {
    pub indent: &'static str,
    pub cols: &'static [Col],
    pub last: &'static str,
}

impl Table {
    /// One line: `cells` under the columns, then `last`.
    pub fn line(&self, cells: &[&dyn std::fmt::Display], last: &str) -> String {
        let mut out = String::from(self.indent);
        for (i, (c, v)) in self.cols.iter().zip(cells).enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out += &if c.2 {
                format!("{v:<w$}", w = c.1)
            } else {
                format!("{v:>w$}", w = c.1)
            };
        }
        out + "  " + last
    }

    /// The heading's line.
    pub fn heading_line(&self) -> String {
        let heads: Vec<&dyn std::fmt::Display> = self
            .cols
            .iter()
            .map(|c| &c.0 as &dyn std::fmt::Display)
            .collect();
        self.line(&heads, self.last)
    }

    /// Print the heading.
    pub fn heading(&self) {
        println!("{}", self.heading_line());
    }

    /// Print a row.
    pub fn row(&self, cells: &[&dyn std::fmt::Display], last: &str) {
        println!("{}", self.line(cells, last));
    }
}

/// `name count` pairs joined by `, ` (with `nonzero`, only those whose
/// count is not zero); empty for none.
pub fn joined(p: &[(String, u64)], nonzero: bool) -> String {
    let v: Vec<String> = p
        .iter()
        .filter(|(_, n)| !nonzero || *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    v.join(", ")
}

/// [`joined`], or `-` for none.
pub fn pairs(p: &[(String, u64)], nonzero: bool) -> String {
    let s = joined(p, nonzero);
    if s.is_empty() {
        "-".to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines are those the tables' `format!`s printed, to the byte.
    #[test]
    fn lines_are_the_formats_they_replace() {
        const T: Table = Table {
            indent: "  ",
            cols: &[right("id", 6), left("state", 10), left("peer", 22)],
            last: "drops",
        };
        assert_eq!(
            T.line(&[&"id", &"state", &"peer"], T.last),
            format!("  {:>6} {:<10} {:<22}  drops", "id", "state", "peer")
        );
        let p = "127.0.0.1:7000";
        assert_eq!(
            T.line(&[&258u32, &"a state longer than ten", &p], "x 1"),
            format!(
                "  {:>6} {:<10} {:<22}  {}",
                258u32, "a state longer than ten", p, "x 1"
            )
        );
        let d = [("a".to_string(), 0), ("b".to_string(), 2)];
        assert_eq!(pairs(&d, true), "b 2");
        assert_eq!(pairs(&d, false), "a 0, b 2");
        assert_eq!(pairs(&d[..1], true), "-");
        assert_eq!(joined(&d[..1], true), "");
    }

    /// The SPINE tables' headings, as their `format!`s printed them (the
    /// handlers' with the column of timed invocations since, the peer
    /// queues' with the joining user's, the peer queues' and links' with
    /// the frames their `PORT_OUT` messages sent out of a port).
    #[test]
    fn the_headings_are_as_they_were() {
        assert_eq!(
            super::super::link::LINKS.heading_line(),
            format!(
                "  {:>6} {:<10} {:<22} {:>6} {:>8} {:>10} {:>10} {:>10}  drops",
                "id", "state", "peer", "theirs", "pid", "msgs in", "msgs out", "to port"
            )
        );
        assert_eq!(
            super::super::PEERS.heading_line(),
            format!(
                "  {:>8} {:>4} {:<18} {:>8} {:>6} {:>8} {:>12} {:>12} {:>12}  drops",
                "index", "side", "state", "pid", "user", "depth", "in", "out", "to port"
            )
        );
        assert_eq!(
            super::super::HANDLERS.heading_line(),
            format!(
                "    {:>6} {:<20} {:>12} {:>10} {:>10} {:>10}  terminations",
                "number", "method", "invocations", "timed", "avg ns", "max ns"
            )
        );
    }
}
