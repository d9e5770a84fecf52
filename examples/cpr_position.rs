//! `cpr_position`: what a crossterm program does to learn where its cursor is.
//!
//! Calls `crossterm::cursor::position()` (which enables raw mode, writes `ESC [ 6 n` and waits
//! up to 2 s for the terminal's cursor position report) and prints `position <col> <row>`
//! (0-based, crossterm's convention) and exits 0, or prints `cpr_position: error: <e>` and
//! exits 1.

fn main() {
    match crossterm::cursor::position() {
        Ok((col, row)) => {
            println!("position {col} {row}");
        }
        Err(e) => {
            println!("cpr_position: error: {e}");
            std::process::exit(1);
        }
    }
}
