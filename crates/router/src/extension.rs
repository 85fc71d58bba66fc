//! The router extension's arrays in a JIVE VM: the static fields of
//! `extensions/router/LcTrie.java` (`trie`, `base`, `pre`, `hops`,
//! `nhBits`) filled from an [`LcTrie`], and the heap they take, for the
//! hosts that run that class over a trie (`unet bench router lookup` and
//! the tests that check the Java lookup against [`LcTrie::lookup`]).

use jive::heap::ARRAY_HEADER_BYTES;
use jive::{Elem, Vm};

use crate::lctrie::LcTrie;

/// The `int[]` fields of `LcTrie.java` and the trie's array each holds.
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
/// `LcTrie.java`, and its next-hop bits in `nhBits`.
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
