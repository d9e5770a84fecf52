//! `inline_viewport`: a ratatui app with an inline viewport, the way coding-agent TUIs start.
//!
//! `Terminal::with_options(.., Viewport::Inline(5))` asks the terminal where the cursor is
//! (a cursor position report) before it can place the viewport. Draws a bordered box with the
//! line `inline-viewport-ok`, leaves the cursor below it and exits 0; when the terminal cannot
//! be set up it prints `inline_viewport: error: <e>` and exits 1.

use ratatui::backend::CrosstermBackend;
use ratatui::widgets::{Block, Paragraph};
use ratatui::{Terminal, TerminalOptions, Viewport};

fn run() -> std::io::Result<()> {
    crossterm::terminal::enable_raw_mode()?;
    let backend = CrosstermBackend::new(std::io::stdout());
    let mut terminal = Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Inline(5),
        },
    )?;
    terminal.draw(|f| {
        let p = Paragraph::new("inline-viewport-ok").block(Block::bordered().title("inline"));
        f.render_widget(p, f.area());
    })?;
    crossterm::terminal::disable_raw_mode()?;
    println!();
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        let _ = crossterm::terminal::disable_raw_mode();
        println!("inline_viewport: error: {e}");
        std::process::exit(1);
    }
}
