//! The applets `unet bench overhead` times: the micro applets, each of
//! whose `doTx`/`doRx` does one step of the U-Net/SLE paper's Figure 7
//! (nothing, 16 null natives, a DMA of 0 bytes or of the message, a push,
//! a free buffer), written out as Java and compiled with RawUnet.

use super::Args;
use crate::bench::applet_build;

/// (class, doTx body, doRx body) of the micro applets.
const MICRO: [(&str, &str, &str); 6] = [
    ("OvEmpty", "return 0;", "return 0;"),
    ("OvNative", NATIVE16, NATIVE16),
    (
        "OvDma0",
        "doHtoLDMA(TxBuf, 0, off, 0); return 0;",
        "doLtoHDMA(RxBuf, 0, 4096, 0); return 0;",
    ),
    (
        "OvDma",
        "doHtoLDMA(TxBuf, 0, off, length); return 0;",
        "doLtoHDMA(RxBuf, 0, 4096, length); return 0;",
    ),
    (
        "OvPush",
        "txPush(TxBuf, 0, channel, length); return 0;",
        "if (length <= 56) { dmaRxdPayload(RxBuf, channel, length); } \
         else { offsets[0] = 4096; dmaRxd(offsets, channel, length); } return 0;",
    ),
    (
        "OvGetFree",
        "return 0;",
        "int o = getFreeBuffer(); if (o == -1) return 0; return 0;",
    ),
];

const NATIVE16: &str = "getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); getFreeBufferLength(); getFreeBufferLength(); \
    getFreeBufferLength(); return 0;";

fn micro_source(class: &str, tx: &str, rx: &str) -> String {
    format!(
        "import static unet.sle.Natives.*;\n\n\
         public class {class} {{\n\
         \x20 public static byte[] TxBuf;\n\
         \x20 public static byte[] RxBuf;\n\
         \x20 public static int[] offsets;\n\n\
         \x20 {class}() {{\n\
         \x20   TxBuf = newAlignedArray(4096);\n\
         \x20   offsets = new int[14];\n\
         \x20 }}\n\n\
         \x20 private static int doTx(int length, int channel, int off) {{\n\
         \x20   {tx}\n\
         \x20 }}\n\n\
         \x20 private static int doRx(int length, int channel) {{\n\
         \x20   {rx}\n\
         \x20 }}\n\
         }}\n"
    )
}

/// Compiles the micro applets and RawUnet; their class files by name.
pub(super) fn compile(a: &Args) -> Result<Vec<(String, Vec<u8>)>, String> {
    let (mut files, sdk) =
        applet_build::sources(a.applets_dir.as_deref(), a.sdk_dir.as_deref(), &["RawUnet"])?;
    let tmp = applet_build::BuildDir::new("overhead", a.keep)?;
    let src = tmp.path.join("src");
    let classes = tmp.path.join("classes");
    std::fs::create_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    for (class, tx, rx) in MICRO {
        let p = src.join(format!("{class}.java"));
        std::fs::write(&p, micro_source(class, tx, rx))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        files.push(p);
    }
    applet_build::javac(&sdk, &classes, &files)?;
    let mut out = Vec::new();
    for name in MICRO.iter().map(|m| m.0).chain(["RawUnet"]) {
        let p = classes.join(format!("{name}.class"));
        let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        out.push((name.to_string(), bytes));
    }
    Ok(out)
}
