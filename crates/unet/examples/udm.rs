//! UDM on unet (the guide `docs/udm.md`): a job of two nodes (here two
//! threads of one process; each could be a process of its own, joining
//! with the job's ticket), node 0 injecting numbers to node 1's handler
//! 7, node 1 extracting them and answering with their sum.
//!
//! ```sh
//! cargo run --release -p unet --example udm
//! ```

use unet::udm::{JobConfig, MAX_WORDS};
use unet::{Engine, EngineConfig, Session};

const NUMBERS: u64 = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::start(EngineConfig::default())?;
    let session = Session::embedded(&engine)?;
    let ticket = session.udm_create_job(&JobConfig {
        nodes: 2,
        ..JobConfig::default()
    })?;
    println!("job ticket {ticket} (another process would join with it)");

    let mut node1 = session.udm_join(ticket, 1)?;
    let summer = std::thread::spawn(move || -> Result<u64, String> {
        let mut words = [0u64; MAX_WORDS];
        let (mut sum, mut seen) = (0, 0);
        while seen < NUMBERS {
            if !node1.message_available() {
                std::hint::spin_loop();
                continue;
            }
            let h = node1.extract(&mut words).map_err(|e| format!("{e:?}"))?;
            if h.handler == 7 {
                sum += words[0];
                seen += 1;
            }
        }
        node1.inject(0, 8, &[sum]).map_err(|e| format!("{e:?}"))?;
        Ok(sum)
    });

    let mut node0 = session.udm_join(ticket, 0)?;
    for n in 1..=NUMBERS {
        // Whole or nothing; waits while node 1's ring is full.
        node0.inject(1, 7, &[n])?;
    }
    let mut words = [0u64; MAX_WORDS];
    let answer = loop {
        if node0.message_available() {
            let h = node0.extract(&mut words)?;
            if h.handler == 8 {
                break words[0];
            }
        }
        std::hint::spin_loop();
    };
    let sum = summer.join().map_err(|_| "node 1's thread panicked")??;
    println!("node 1 summed {NUMBERS} numbers to {sum}; node 0 got {answer}");
    if answer != NUMBERS * (NUMBERS + 1) / 2 {
        return Err("a wrong sum".into());
    }
    Ok(())
}
