//! UDM's operations between nodes of one job: inject and extract, peek and
//! dispose, the message-available flag, the errors, who may join, and a
//! switch to buffered mode and back when a receiver with a full fast ring
//! takes nothing for the atomicity timeout.

use std::time::Duration;

use unet::udm::*;
use unet::*;

fn engine() -> (Engine, Session) {
    let e = Engine::start(EngineConfig::default()).unwrap();
    let s = Session::embedded(&e).unwrap();
    (e, s)
}

#[test]
fn inject_extract_peek_dispose_and_the_flag() {
    let (_e, s) = engine();
    let t = s.udm_create_job(&JobConfig::default()).unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 1).unwrap();
    assert_eq!((a.rank(), b.rank(), a.nodes()), (0, 1, 2));
    assert!(!b.message_available());
    let mut w = [0u64; MAX_WORDS];
    assert_eq!(b.extract(&mut w), Err(ExtractError::Empty));
    assert_eq!(b.dispose(), Err(ExtractError::Empty));
    assert_eq!(b.peek(), Err(ExtractError::Empty));

    a.inject(1, 7, &[1, 2, 3]).unwrap();
    a.inject(1, 8, &[]).unwrap();
    let full: Vec<u64> = (100..100 + MAX_WORDS as u64).collect();
    assert!(a.injectc(1, 9, &full).unwrap());
    assert!(b.message_available());
    let p = b.peek().unwrap();
    assert_eq!((p.src, p.handler, p.words()), (0, 7, &[1u64, 2, 3][..]));
    // Peeking again shows the same message.
    assert_eq!(b.peek().unwrap(), p);
    let h = b.extract(&mut w).unwrap();
    assert_eq!(
        h,
        Header {
            src: 0,
            handler: 7,
            len: 3
        }
    );
    assert_eq!(&w[..3], &[1, 2, 3]);
    let h = b.extract(&mut w).unwrap();
    assert_eq!(
        h,
        Header {
            src: 0,
            handler: 8,
            len: 0
        }
    );
    // Too little room: the message stays.
    let mut small = [0u64; 4];
    assert_eq!(
        b.extract(&mut small),
        Err(ExtractError::TooShort(MAX_WORDS))
    );
    let h = b.extract(&mut w).unwrap();
    assert_eq!((h.handler, h.len), (9, MAX_WORDS));
    assert_eq!(&w[..], &full[..]);
    assert!(!b.message_available());

    // Disposing without extracting.
    a.inject(1, 1, &[5]).unwrap();
    b.dispose().unwrap();
    assert_eq!(b.dispose(), Err(ExtractError::Empty));

    // A node may send to itself.
    b.inject(1, 3, &[42]).unwrap();
    assert_eq!(b.extract(&mut w).unwrap().src, 1);
    assert_eq!(w[0], 42);

    assert_eq!(a.inject(2, 0, &[]), Err(InjectError::BadDest(2)));
    assert_eq!(a.inject(1, 0, &[0; 15]), Err(InjectError::TooLong(15)));
    let st = b.stats();
    assert_eq!(st.fast_msgs, 5);
    assert_eq!(st.buffered_taken, 0);
    assert_eq!(b.mode(), Mode::Fast);
}

#[test]
fn only_the_key_joins_and_each_rank_once() {
    let (_e, s) = engine();
    let t = s.udm_create_job(&JobConfig::default()).unwrap();
    let _a = s.udm_join(t, 0).unwrap();
    let code = |r: Result<Node, Error>| match r {
        Err(Error::Engine(c)) => c,
        other => panic!("{other:?}"),
    };
    assert_eq!(code(s.udm_join(t, 0)), ErrorCode::RankTaken);
    assert_eq!(code(s.udm_join(t, 2)), ErrorCode::RankTaken);
    let wrong = JobTicket {
        key: t.key ^ 1,
        ..t
    };
    assert_eq!(code(s.udm_join(wrong, 1)), ErrorCode::NoSuchJob);
    // Another session (another process would be the same) joins with the
    // ticket, as text.
    let s2 = Session::embedded(&_e).unwrap();
    let t2: JobTicket = t.to_string().parse().unwrap();
    assert_eq!(t2, t);
    let b = s2.udm_join(t2, 1).unwrap();
    // A left rank is gone for good.
    b.leave().unwrap();
    assert_eq!(code(s2.udm_join(t, 1)), ErrorCode::RankTaken);
    // Bad geometry.
    let bad = JobConfig {
        nodes: 0,
        ..JobConfig::default()
    };
    assert!(matches!(
        s.udm_create_job(&bad),
        Err(Error::Engine(ErrorCode::BadGeometry))
    ));
}

#[test]
fn a_full_fast_ring_not_taken_from_switches_to_buffered_mode_and_back() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        fast_queue: 4,
        ..JobConfig::default()
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 1).unwrap();
    // The fifth waits until the engine switches b (it takes nothing).
    for i in 0..100u64 {
        a.inject(1, (i % 3) as u16, &[i, !i]).unwrap();
    }
    assert_eq!(b.mode(), Mode::Buffered);
    let mut w = [0u64; MAX_WORDS];
    for i in 0..100u64 {
        assert!(b.wait(Some(Duration::from_secs(5))), "message {i}");
        let h = b.extract(&mut w).unwrap();
        assert_eq!((h.src, h.handler, h.len), (0, (i % 3) as u16, 2));
        assert_eq!(&w[..2], &[i, !i], "in order");
    }
    assert!(!b.message_available());
    assert_eq!(b.mode(), Mode::Fast);
    let st = b.stats();
    assert_eq!(st.fast_msgs, 4);
    assert_eq!(st.buffered_taken, 96);
    assert_eq!(st.engine(UdmCounter::BufferedMsgs), 96);
    assert_eq!(st.engine(UdmCounter::SwitchTimeout), 1);
    assert_eq!(st.switch_queue_full, 0, "a full ring switches nothing");
    // Fast again.
    a.inject(1, 0, &[7]).unwrap();
    b.extract(&mut w).unwrap();
    assert_eq!(b.stats().fast_msgs, 5);
}

#[test]
fn a_node_atomic_past_the_timeout_is_switched_and_still_takes_everything_in_order() {
    let (_e, s) = engine();
    let cfg = JobConfig {
        fast_queue: 8,
        atomicity_timeout: Duration::from_millis(2),
        ..JobConfig::default()
    };
    let t = s.udm_create_job(&cfg).unwrap();
    let mut a = s.udm_join(t, 0).unwrap();
    let mut b = s.udm_join(t, 1).unwrap();
    b.beginatom(ATOM_DISABLE);
    assert_eq!(b.atomicity(), ATOM_DISABLE);
    // Fewer than the fast ring holds: only the engine can switch it.
    a.inject(1, 0, &[0]).unwrap();
    a.inject(1, 0, &[1]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while b.mode() != Mode::Buffered {
        assert!(std::time::Instant::now() < deadline, "never switched");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(b.stats().engine(UdmCounter::SwitchTimeout), 1);
    assert_eq!(b.stats().switch_queue_full, 0);
    for i in 2..50u64 {
        a.inject(1, 0, &[i]).unwrap();
    }
    // Still atomic: it polls the flag and extracts, fast ones first.
    let mut w = [0u64; MAX_WORDS];
    for i in 0..50u64 {
        assert!(b.wait(Some(Duration::from_secs(5))));
        b.extract(&mut w).unwrap();
        assert_eq!(w[0], i);
    }
    b.endatom(ATOM_DISABLE);
    assert_eq!(b.atomicity(), 0);
    let st = b.stats();
    assert_eq!((st.fast_msgs, st.buffered_taken), (2, 48));
    assert_eq!(b.mode(), Mode::Fast);
    // Not atomic, but a message waits and it takes none: switched too
    // (the engine's sweep finds it within a second if nothing told it).
    a.inject(1, 0, &[50]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while b.mode() != Mode::Buffered {
        assert!(std::time::Instant::now() < deadline, "never switched");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(b.stats().engine(UdmCounter::SwitchTimeout), 2);
    b.extract(&mut w).unwrap();
    assert_eq!(w[0], 50);
    assert!(!b.message_available());
    assert_eq!(b.mode(), Mode::Fast);
}
