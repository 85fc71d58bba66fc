//! The router extension's lookup in a JIVE VM outside an engine: the
//! static fields of `extensions/router/Router.java` (`trie`, `base`,
//! `pre`, `hops`, `nhBits`) filled from an [`LcTrie`], the heap they take,
//! and stand-ins for the `spine` natives the class links against (its
//! handlers run only in an engine; its `lookup` and `lookupAll` call no
//! native), for the hosts that run that class over a trie (`unet bench
//! router lookup` and the tests that check the Java lookup against
//! [`LcTrie::lookup`]).

use jive::heap::ARRAY_HEADER_BYTES;
use jive::{Elem, Fault, NativeCtx, NativeResult, Natives, Vm};

use crate::lctrie::LcTrie;

/// The `int[]` fields of `Router.java` and the trie's array each holds.
fn fields(t: &LcTrie) -> [(&'static str, &[u32]); 4] {
    let a = t.arrays();
    [
        ("trie", a.trie),
        ("base", a.base),
        ("pre", a.pre),
        ("hops", a.hops),
    ]
}

/// Bytes of JIVE heap the trie's arrays take (each with its header): the
/// least heap quota of a VM that [`fill_fields`] can fill.
pub fn heap_bytes(t: &LcTrie) -> usize {
    fields(t)
        .iter()
        .map(|(_, v)| v.len() * 4 + ARRAY_HEADER_BYTES)
        .sum()
}

/// Put `t`'s arrays in new `int[]`s of `vm`'s heap, in the static fields of
/// `Router.java`, and its next-hop bits in `nhBits`.
pub fn fill_fields<C>(vm: &mut Vm<C>, t: &LcTrie) -> Result<(), String> {
    for (name, words) in fields(t) {
        let f = vm
            .static_field(name)
            .ok_or_else(|| format!("the class has no field {name}"))?;
        let arr = vm
            .new_array(Elem::Int, words.len())
            .map_err(|e| format!("{name}: {e}"))?;
        let dst = vm.ints_mut(arr).ok_or("a fresh array is not an int[]")?;
        for (d, &w) in dst.iter_mut().zip(words) {
            *d = w as i32;
        }
        vm.try_set_array_field(f, arr)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    let nh = vm
        .static_field("nhBits")
        .ok_or("the class has no field nhBits")?;
    vm.set_int_field(nh, t.arrays().nh_bits as i32);
    Ok(())
}

/// The domain [`spine_stubs`] fills, as the engine names it.
pub const SPINE_DOMAIN: &str = "spine";

fn engine_only<H>(_: &mut H, _: &mut NativeCtx<'_>, _: &[i32]) -> NativeResult {
    Err(Box::new(Fault::Native(
        "a SPINE native: only in the engine".to_string(),
    )))
}

/// The `spine` domain's natives (`unet/spine/Spine`, with the engine's
/// descriptors), each faulting when called: what `Router.class` links
/// against when it is loaded (granted [`SPINE_DOMAIN`]) to run its lookup
/// outside an engine, as the SDK's plain-Java stand-ins do on a JVM.
pub fn spine_stubs<H>() -> Natives<H> {
    const CLASS: &str = "unet/spine/Spine";
    let mut n = Natives::new();
    n.register(
        SPINE_DOMAIN,
        CLASS,
        "addHandler",
        "(Ljava/lang/String;II)Z",
        engine_only::<H>,
    );
    for (name, desc) in [
        ("argsLength", "(I)I"),
        ("argByte", "(II)I"),
        ("argInt", "(II)I"),
        ("readArgs", "(II[BII)I"),
        ("source", "(I)I"),
        ("bulk", "(I)I"),
        ("bufferLength", "(I)I"),
        ("readBuffer", "(II[BII)I"),
        ("writeBuffer", "(II[BII)I"),
        ("keep", "(I)I"),
        ("release", "(I)V"),
        ("send", "(II[BII)I"),
        ("sendBulk", "(II[BIII)I"),
        ("reply", "(II[BII)I"),
        ("nowMicros", "()I"),
        ("timer", "(ILjava/lang/String;I)I"),
        ("table", "(II)[I"),
    ] {
        n.register_ephemeral(SPINE_DOMAIN, CLASS, name, desc, engine_only::<H>);
    }
    n
}
