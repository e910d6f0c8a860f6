//! Notifications: the notifier interface, the Telegram Bot API, and the outbox.
