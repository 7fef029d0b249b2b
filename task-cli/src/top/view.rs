//! Drawing a frame: header, tasks grouped by type, the selected task's details and output (or
//! the task list), and a footer of keys. Fits 80×24; ratatui redraws only the cells that
//! changed, so nothing flickers.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, TableState, Wrap};
use task_core::{TaskType, now_ms};

use super::app::{App, Mode};
use super::details::{self, status_style};
use super::state::OutputPane;
use crate::render;

/// Draws the whole dashboard.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let [header, tasks, lower, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(45),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(header_line(app), header);
    draw_tasks(frame, app, tasks);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(lower);
    draw_details(frame, app, left);
    match &app.list {
        Some(_) => draw_list(frame, app, right),
        None => draw_output(frame, app, right),
    }
    frame.render_widget(footer_line(app), footer);
    if app.mode == Mode::Help {
        draw_help(frame);
    }
}

fn header_line(app: &App) -> Paragraph<'static> {
    let pill = app
        .tasks
        .pill
        .as_ref()
        .map(|p| p.label.clone())
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "idle".into());
    let mut spans = vec![
        Span::styled(" tasks top ", Style::new().add_modifier(Modifier::REVERSED)),
        Span::raw(format!(" session {} · {pill}", app.session.paths().name())),
    ];
    if app.tasks.problems > 0 {
        spans.push(Span::styled(
            format!(" · {} unreadable record(s): tasks ps", app.tasks.problems),
            Style::new().fg(Color::Red),
        ));
    }
    if app.tasks.hidden > 0 {
        spans.push(Span::styled(
            format!(" · {} finished hidden (a)", app.tasks.hidden),
            Style::new().fg(Color::DarkGray),
        ));
    }
    Paragraph::new(Line::from(spans))
}

fn draw_tasks(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let now = now_ms();
    let mut rows = Vec::new();
    let mut selected_row = None;
    let mut group = None;
    let positions = task_session::queue::positions(app.tasks.shown.iter().map(|t| &t.record));
    for listed in &app.tasks.shown {
        let base = &listed.record.task.base;
        if group != Some(base.task_type) {
            group = Some(base.task_type);
            let count = app
                .tasks
                .shown
                .iter()
                .filter(|t| t.record.task.base.task_type == base.task_type)
                .count();
            rows.push(
                Row::new(vec![
                    group_name(base.task_type).to_owned(),
                    format!("({count})"),
                ])
                .style(Style::new().add_modifier(Modifier::BOLD)),
            );
        }
        if app.selected == Some(base.id) {
            selected_row = Some(rows.len());
        }
        rows.push(
            Row::new(vec![
                format!("  {}", base.id),
                match positions.get(&base.id) {
                    Some(position) => format!("queued #{position}"),
                    None => base.status.as_str().to_owned(),
                },
                render::age(now.saturating_sub(base.start_time)),
                render::size(listed.output_bytes),
                details::one_line_state(&listed.record.task, listed.worktree_changes),
            ])
            .style(status_style(base.status)),
        );
    }
    let empty = rows.is_empty();
    let table = Table::new(
        rows,
        [
            Constraint::Length(11),
            Constraint::Length(9),
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Fill(1),
        ],
    )
    .header(
        Row::new(["ID", "STATUS", "AGE", "OUTPUT", "WHAT"]).style(Style::new().fg(Color::DarkGray)),
    )
    .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
    .block(Block::new().borders(Borders::TOP).title(" Tasks "));
    let mut state = TableState::default().with_selected(selected_row);
    frame.render_stateful_widget(table, area, &mut state);
    if empty {
        let inner = Rect {
            y: area.y + 2,
            height: 1,
            ..area
        };
        frame.render_widget(
            Paragraph::new("  No background tasks. Start one: tasks run -- CMD"),
            inner,
        );
    }
}

fn group_name(task_type: TaskType) -> &'static str {
    match task_type {
        TaskType::LocalBash => "Shells",
        TaskType::LocalAgent => "Agents",
        TaskType::RemoteAgent => "Remote",
        TaskType::InProcessTeammate => "Teammates",
        TaskType::LocalWorkflow => "Workflows",
        TaskType::MonitorMcp => "Monitors",
        TaskType::Dream => "Dreams",
    }
}

fn selected(app: &App) -> Option<&super::state::Listed> {
    app.selected
        .and_then(|id| app.tasks.position(&id))
        .map(|i| &app.tasks.shown[i])
}

fn draw_details(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let lines =
        selected(app).map_or_else(Vec::new, |t| details::lines(&t.record, t.worktree_changes));
    let block = Block::new()
        .borders(Borders::TOP | Borders::RIGHT)
        .title(" Details ");
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn draw_output(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let height = usize::from(area.height.saturating_sub(1));
    let output = &app.output;
    let lines: Vec<Line<'_>> = last_lines(output, height)
        .into_iter()
        .map(Line::raw)
        .collect();
    let title = match output.id {
        Some(id) => format!(" Output of {id} (following; o: pager) "),
        None => " Output ".into(),
    };
    let block = Block::new().borders(Borders::TOP).title(title);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The newest `height` lines of the pane, the line still being written last.
fn last_lines(output: &OutputPane, height: usize) -> Vec<&str> {
    let partial = Some(output.partial()).filter(|p| !p.is_empty());
    let complete = height.saturating_sub(usize::from(partial.is_some()));
    let skipped = output.lines.len().saturating_sub(complete);
    output
        .lines
        .iter()
        .skip(skipped)
        .map(String::as_str)
        .chain(partial)
        .collect()
}

fn draw_list(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let Some(list) = &app.list else { return };
    let mut lines: Vec<Line<'_>> = Vec::new();
    if let Some(error) = &list.error {
        lines.push(Line::raw(format!("cannot read the list: {error}")));
    }
    if list.lines.is_empty() && list.error.is_none() {
        lines.push(Line::raw(
            "No tasks in this list. Add one: tasks list create SUBJECT",
        ));
    }
    for task in &list.lines {
        let (mark, style) = if task.ready {
            ("ready", Style::new().fg(Color::Green))
        } else if !task.blocked_by.is_empty() {
            ("blocked", Style::new().fg(Color::Red))
        } else {
            ("", Style::new())
        };
        let mut text = format!(
            "{:<4} {:<11} {:<7} {}",
            task.id, task.status, mark, task.subject
        );
        if let Some(owner) = &task.owner {
            text.push_str(&format!(" ({owner})"));
        }
        if !task.blocked_by.is_empty() {
            text.push_str(&format!(" ← {}", task.blocked_by.join(", ")));
        }
        lines.push(Line::styled(text, style));
    }
    if !list.graph.trim().is_empty() {
        lines.push(Line::raw(""));
        lines.extend(list.graph.lines().map(|l| Line::raw(l.to_owned())));
    }
    let block = Block::new()
        .borders(Borders::TOP)
        .title(format!(" Task list {} (l: close) ", list.name));
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn footer_line(app: &App) -> Paragraph<'static> {
    let text = match &app.mode {
        Mode::ConfirmKill(id) => format!(" Kill {id} and its process tree? y/n"),
        Mode::Send { to, text } => format!(" Message to {to}: {text}▏ (Enter: send, Esc: cancel)"),
        _ => match &app.message {
            Some(message) => format!(" {message}"),
            None => " ↑↓ select  x kill  s send  o pager  l list  a all  ? help  q quit".into(),
        },
    };
    Paragraph::new(text).style(Style::new().add_modifier(Modifier::REVERSED))
}

const HELP: &[(&str, &str)] = &[
    ("↑ ↓  j k", "select a task (PgUp PgDn Home End)"),
    ("x  Del", "kill the selected task (asks first)"),
    ("s", "send a message to the selected agent"),
    ("o  Enter", "open the whole output in $PAGER"),
    ("l", "show or hide the task list"),
    ("a", "show or hide finished, delivered tasks"),
    ("?  F1", "this help"),
    ("q  Esc", "quit"),
];

fn draw_help(frame: &mut Frame<'_>) {
    let area = frame.area();
    let width = 56.min(area.width);
    let height = (HELP.len() as u16 + 4).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let mut lines: Vec<Line<'_>> = HELP
        .iter()
        .map(|(keys, what)| Line::raw(format!(" {keys:<10} {what}")))
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        " any key closes this help",
        Style::new().fg(Color::DarkGray),
    ));
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Keys ")),
        popup,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_being_written_comes_after_the_newest_complete_lines() {
        let mut pane = OutputPane::default();
        pane.push("a\nb\nc\nprompt? ");
        assert_eq!(last_lines(&pane, 3), ["b", "c", "prompt? "]);
        assert_eq!(last_lines(&pane, 10), ["a", "b", "c", "prompt? "]);
        pane.push("y\n");
        assert_eq!(last_lines(&pane, 3), ["b", "c", "prompt? y"]);
    }
}
