//! The router extension's Java lookup (`extensions/router/Router.java`),
//! compiled with javac and run by JIVE, interpreted and compiled, gives the
//! Rust LC-trie's answer on every sampled address: a generated table, and
//! the full table when it is beside the repository (which also reports the
//! JIVE heap the full table needs).

use std::path::{Path, PathBuf};
use std::process::Command;

use jive::{Class, Elem, Limits, Vm};
use unet_router::table::{self, generated, Route, SplitMix};
use unet_router::{extension, LcTrie};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `Router.class`, compiled by the JDK `scripts/find-jdk` finds.
fn class_bytes() -> Vec<u8> {
    let out = Command::new("bash")
        .arg(repo().join("scripts/find-jdk"))
        .output()
        .expect("cannot run `bash scripts/find-jdk`");
    assert!(
        out.status.success(),
        "the router's extension test compiles Java and needs a JDK 22 or later; \
         scripts/find-jdk found none (set JAVA_HOME to one):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let javac = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin/javac");
    let dir = std::env::temp_dir().join(format!(
        "unet-router-jive-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    // `-options` only silences javac's note that release 8 is obsolete.
    let run = Command::new(javac)
        .args(["--release", "8", "-Xlint:all,-options", "-Werror", "-d"])
        .arg(&dir)
        .arg("-sourcepath")
        .arg(repo().join("java/applet-sdk/src/main/java"))
        .arg(repo().join("extensions/router/Router.java"))
        .output()
        .expect("cannot run javac");
    assert!(
        run.status.success(),
        "javac failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let bytes = std::fs::read(dir.join("Router.class")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    bytes
}

/// A VM of the class with the trie's arrays in its fields; the heap quota
/// is what the arrays take and a sample of addresses for `lookupAll`.
fn vm_with(bytes: &[u8], t: &LcTrie) -> (Vm<()>, jive::MethodId, usize) {
    let class = Class::load(
        bytes,
        &extension::spine_stubs::<()>(),
        &[extension::SPINE_DOMAIN],
    )
    .expect("Router loads");
    let quota = extension::heap_bytes(t) + SAMPLE * 4 + 16;
    let limits = Limits {
        heap_quota: quota,
        ..Limits::default()
    };
    let mut vm = Vm::new(class.clone(), limits, &mut ()).unwrap();
    extension::fill_fields(&mut vm, t).unwrap();
    (vm, class.method("lookup").unwrap(), quota)
}

/// Addresses `lookupAll` is given at once.
const SAMPLE: usize = 10_000;

fn check(bytes: &[u8], routes: &[Route], n: usize, seed: u64) -> usize {
    let t = LcTrie::build(routes).unwrap();
    let (mut vm, m, quota) = vm_with(bytes, &t);
    let p = vm.prepare::<1>(m).unwrap();
    let mut rng = SplitMix(seed);
    let addrs: Vec<u32> = (0..n)
        .map(|i| {
            let a = rng.next_u32();
            if i % 2 == 0 || routes.is_empty() {
                return a;
            }
            let r = routes[rng.below(routes.len() as u32) as usize];
            r.prefix | (a & !table::mask(r.len))
        })
        .collect();
    let want: Vec<i32> = addrs
        .iter()
        .map(|&a| t.lookup(a).map_or(-1, |h| h as i32))
        .collect();
    for compiled in [false, true] {
        if compiled {
            assert!(vm.compile().unwrap() > 0, "lookup compiles");
            assert!(vm.is_compiled(m));
        }
        for (&a, &w) in addrs.iter().zip(&want) {
            let got = vm.invoke_prepared(&mut (), p, [a as i32]).unwrap();
            assert_eq!(got, Some(w), "address {a:#010x}, compiled {compiled}");
        }
        // `lookupAll` sums the same answers.
        let k = SAMPLE.min(n);
        let arr = vm.new_array(Elem::Int, k).unwrap();
        for (d, &a) in vm.ints_mut(arr).unwrap().iter_mut().zip(&addrs) {
            *d = a as i32;
        }
        let all = vm.class().method("lookupAll").unwrap();
        let sum = want[..k].iter().fold(0i32, |s, &w| s.wrapping_add(w));
        let got = vm.invoke(&mut (), all, &[arr.handle()]).unwrap();
        assert_eq!(got, Some(sum), "lookupAll, compiled {compiled}");
        assert_eq!(vm.is_compiled(all), compiled);
    }
    quota
}

#[test]
fn the_java_lookup_agrees_with_rust_interpreted_and_compiled() {
    let bytes = class_bytes();
    let mut routes = generated(100_000, 21, 16);
    check(&bytes, &routes, 300_000, 1);
    routes.push(Route::new(0, 0, 3));
    check(&bytes, &routes, 300_000, 2);
    check(&bytes, &generated(1000, 22, 16), 100_000, 3);
    check(&bytes, &[], 1000, 4);
}

#[test]
fn the_java_lookup_agrees_on_the_full_table_when_present() {
    let routes = match table::full_table(16) {
        Ok(r) => r,
        Err(table::TableError::Absent(p)) => {
            eprintln!("SKIPPED: the full table is not at {}", p.display());
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let quota = check(&class_bytes(), &routes, 500_000, 5);
    eprintln!("full table in JIVE: a heap of {quota} bytes");
}
