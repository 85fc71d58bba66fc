//! The figures and tables `unet report` regenerates: for each, the
//! command (as `unet` arguments), its quick form, what it needs, how it
//! draws its SVG, and about how long it takes on a 2-core machine (the
//! quick forms about twice what a quiet one took: 66 s for all of them).

/// What a figure's command needs from the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// Root and `ip`: network namespaces, raw sockets.
    Root,
    /// A JDK 22 or later (javac for applets and extensions, HotSpot).
    Jdk,
    /// Maven, to build the Java side (Javia).
    Maven,
    /// The full Internet table beside the repository.
    SharedData,
}

impl Need {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Need::Root => "root",
            Need::Jdk => "JDK 22+",
            Need::Maven => "Maven",
            Need::SharedData => "../shared/data",
        }
    }
}

/// How the command is asked for its SVG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SvgArg {
    /// `--svg FILE`.
    Flag,
    /// `--out DIR`: the SVGs it writes there (one or several).
    OutDir,
    /// `--svg DIR`: the same, under that name (UDM's tables, whose
    /// `--out` is the figures' directory).
    SvgDir,
}

/// One figure or table.
pub(crate) struct Spec {
    pub id: &'static str,
    /// The paper, by its system.
    pub paper: &'static str,
    pub what: &'static str,
    /// `unet` arguments.
    pub args: &'static [&'static str],
    /// Added for `--quick`.
    pub quick: &'static [&'static str],
    pub needs: &'static [Need],
    pub svg: SvgArg,
    /// About how long: (quick, full) seconds.
    pub secs: (u32, u32),
    /// What the paper gives that the plot does not draw (numbers from its
    /// text with no size to place them at), quoted beside the plot; empty
    /// where the command draws or prints the paper's own figures.
    pub paper_text: &'static str,
}

pub(crate) const FIGURES: &[Spec] = &[
    Spec {
        id: "jive-fig3-4",
        paper: "U-Net/SLE",
        what: "Figures 3 and 4: JIVE, interpreted and compiled, against gcc and HotSpot",
        args: &["bench", "jive", "--compile"],
        quick: &["--quick"],
        needs: &[Need::Jdk],
        svg: SvgArg::OutDir,
        secs: (10, 240),
        paper_text: "",
    },
    Spec {
        id: "sle-fig5",
        paper: "U-Net/SLE",
        what: "Figure 5: round trip against message size, no applet and each applet",
        args: &["bench", "pingpong", "--figure5"],
        quick: &["--sizes", "64,1024", "--reps", "1", "--time-ms", "100"],
        needs: &[Need::Jdk],
        svg: SvgArg::Flag,
        secs: (15, 180),
        paper_text: "The paper gives its curves without a table. Its text: the standard U-Net \
                     applet adds 41.2 µs (small messages) to 99.7 µs (large messages) of overhead \
                     each way; the simplified applet brings the large-message overhead to 42.5 µs; \
                     a round trip between applets alone takes 64 to 119 µs (LanAI, Myrinet).",
    },
    Spec {
        id: "sle-fig6",
        paper: "U-Net/SLE",
        what: "Figure 6: bandwidth against size, bursts of 25 then an acknowledgment, four applets",
        args: &["bench", "stream", "--figure6"],
        quick: &["--sizes", "64,4096", "--reps", "1", "--time-ms", "100"],
        needs: &[Need::Jdk],
        svg: SvgArg::Flag,
        secs: (10, 240),
        paper_text: "The paper gives its curves without numbers in its text: a notable drop in \
                     bandwidth with applets, owing to DMA set-up and packet processing in Java.",
    },
    Spec {
        id: "sle-fig7",
        paper: "U-Net/SLE",
        what: "Figure 7: an applet's per-message overhead, step by step",
        args: &["bench", "overhead"],
        quick: &["--quick"],
        needs: &[Need::Jdk],
        svg: SvgArg::Flag,
        secs: (5, 120),
        paper_text: "",
    },
    Spec {
        id: "javia-fig1-4",
        paper: "Javia",
        what: "Figures 1 to 4: Javia against the Rust VIA client and Aeron, round trip and bandwidth",
        args: &["bench", "javia"],
        quick: &["--quick"],
        needs: &[Need::Jdk, Need::Maven],
        svg: SvgArg::OutDir,
        secs: (60, 600),
        paper_text: "",
    },
    Spec {
        id: "udm-table4",
        paper: "UDM",
        what: "Table 4: the fast path's costs",
        args: &["bench", "udm", "table4"],
        quick: &["--quick"],
        needs: &[],
        svg: SvgArg::SvgDir,
        secs: (5, 60),
        paper_text: "",
    },
    Spec {
        id: "udm-table5",
        paper: "UDM",
        what: "Table 5: buffered delivery against the fast path",
        args: &["bench", "udm", "table5"],
        quick: &["--quick"],
        needs: &[],
        svg: SvgArg::SvgDir,
        secs: (5, 60),
        paper_text: "",
    },
    Spec {
        id: "udm-table6",
        paper: "UDM",
        what: "Table 6: the applications standalone (time, messages, time between events, per handler)",
        args: &["bench", "udm", "table6"],
        quick: &["--quick"],
        needs: &[],
        svg: SvgArg::SvgDir,
        secs: (5, 120),
        paper_text: "",
    },
    Spec {
        id: "udm-fig7-8",
        paper: "UDM",
        what: "Figures 7 and 8: the applications under a gang scheduler with skew",
        args: &["bench", "udm", "fig7-8"],
        quick: &["--quick"],
        needs: &[],
        svg: SvgArg::OutDir,
        secs: (10, 900),
        paper_text: "",
    },
    Spec {
        id: "udm-fig9-10",
        paper: "UDM",
        what: "Figures 9 and 10: synth-N under a gang scheduler",
        args: &["bench", "udm", "fig9-10"],
        quick: &["--quick"],
        needs: &[],
        svg: SvgArg::OutDir,
        secs: (10, 600),
        paper_text: "",
    },
    Spec {
        id: "spine-lookup",
        paper: "SPINE",
        what: "The route lookup: LC-trie in Rust and in JIVE, a binary trie and published crates",
        args: &["bench", "router", "lookup"],
        quick: &["--quick"],
        needs: &[Need::Jdk, Need::SharedData],
        svg: SvgArg::Flag,
        secs: (60, 300),
        paper_text: "",
    },
    Spec {
        id: "spine-fig5",
        paper: "SPINE",
        what: "Figure 5: the router's forwarding rate beside Linux's own forwarding",
        args: &["bench", "router", "forward"],
        quick: &["--quick"],
        needs: &[Need::Root, Need::Jdk],
        svg: SvgArg::Flag,
        secs: (40, 900),
        paper_text: "",
    },
    Spec {
        id: "spine-fig6",
        paper: "SPINE",
        what: "Figure 6: the router's event graph under load, its period and latency",
        args: &["bench", "router", "graph"],
        quick: &[],
        needs: &[Need::Root, Need::Jdk],
        svg: SvgArg::Flag,
        secs: (10, 30),
        paper_text: "",
    },
    Spec {
        id: "spine-video",
        paper: "SPINE",
        what: "The video client: several streams and one 1080p stream into a framebuffer, the client's CPU",
        args: &["bench", "video"],
        quick: &["--seconds", "1"],
        needs: &[Need::Jdk],
        svg: SvgArg::Flag,
        secs: (20, 90),
        paper_text: "",
    },
];
