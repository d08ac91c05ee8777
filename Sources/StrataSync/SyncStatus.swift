import Foundation

/// What sync is doing, for an app to show.
public struct SyncStatus: Sendable, Equatable {
    /// What sync is doing now.
    public enum Activity: String, Sendable {
        /// Not started, or stopped.
        case stopped
        /// Up to date as far as it knows; waiting for a change.
        case idle
        /// Sending local saves to the server.
        case pushing
        /// Applying other devices' changes.
        case pulling
        /// The server cannot be reached (``SyncStatus/lastError`` says why);
        /// local saves go on and are pushed once it can.
        case offline
        /// The server refused this device: its login
        /// (``SyncError/Code/authentication``), the zone
        /// (``SyncError/Code/forbidden``), or a layout an operator has to
        /// install (``SyncError/Code/serverLayout``); ``SyncStatus/lastError``
        /// says which. Local saves go on; a started engine tries again on
        /// each wake and poll, and goes on once the server lets it.
        case refused
    }

    /// How a started engine learns of other devices' changes.
    public enum Notifications: String, Sendable {
        /// Listening: a change on the server wakes a round at once.
        case live
        /// Not listening (not started, or the listening connection is down
        /// and being opened again): changes arrive with the next local save
        /// or poll.
        case polling
    }

    /// What sync is doing now.
    public var activity: Activity = .stopped
    /// Whether the server's notifications reach this engine now.
    public var notifications = Notifications.polling
    /// Local saves the server has not acknowledged yet.
    public var pendingChanges = 0
    /// The zone's sequence number of the last server change this store
    /// holds.
    public var serverPosition: Int64 = 0
    /// The zone's last sequence number when this store last looked. While
    /// a device catches up (an initial sync), ``serverPosition`` out of
    /// `serverHead` is how far it has come; an interrupted pull resumes
    /// from ``serverPosition``.
    public var serverHead: Int64 = 0
    /// The error of the last round that failed; nil after a round that
    /// succeeded.
    public var lastError: SyncError?
    /// When the last round that reached the server ended.
    public var lastSync: Date?
    /// The zone's changes this store moved past without applying them, in
    /// the zone's order (kept across launches; `strata sync-status` lists
    /// them too). Sync goes on after each: one unreadable change never
    /// stops a zone.
    public var setAside: [SetAsideChange] = []

    /// A change of the zone that this store did not apply, and why.
    public struct SetAsideChange: Sendable, Equatable, CustomStringConvertible {
        /// Why a change was set aside.
        public enum Reason: String, Sendable {
            /// It does not decode, or it names an entity or an attribute
            /// that no schema of the zone declares, or holds a value of
            /// another type. The device that met it first recorded it in
            /// the zone (when its role may write there), so every device
            /// skips it and the operator sees it
            /// (``SyncServer/setAsideChanges(zone:)``,
            /// `strata sync-server set-aside`).
            case damaged
        }

        /// The change's sequence number in the zone.
        public let serverSequence: Int64
        /// Why it was set aside.
        public let reason: Reason
        /// What was wrong with it.
        public let message: String
        /// Whether the change was this store's own save: its models keep
        /// here what the other devices did not apply.
        public let isOwnSave: Bool

        /// A set-aside change.
        public init(serverSequence: Int64, reason: Reason, message: String, isOwnSave: Bool) {
            self.serverSequence = serverSequence
            self.reason = reason
            self.message = message
            self.isOwnSave = isOwnSave
        }

        /// The sequence number, the reason and the message.
        public var description: String {
            "server change \(serverSequence)\(isOwnSave ? " (this store's save)" : ""), \(reason.rawValue): \(message)"
        }
    }

    /// When this store last found that its zone had lost changes it
    /// applied (the zone was deleted on the server, or restored from an
    /// older backup) and joined it again, uploading everything it holds;
    /// nil if never (kept across launches; `strata sync-status` shows it).
    public var rejoined: Rejoin?

    /// A zone found behind this store, and joined again.
    public struct Rejoin: Sendable, Equatable, CustomStringConvertible {
        /// The store's position in the zone before: how many of the zone's
        /// changes it had applied.
        public let formerPosition: Int64
        /// The zone's head when the store found it behind.
        public let serverHead: Int64
        /// When.
        public let date: Date

        /// A rejoin.
        public init(formerPosition: Int64, serverHead: Int64, date: Date) {
            self.formerPosition = formerPosition
            self.serverHead = serverHead
            self.date = date
        }

        /// What was found, and when.
        public var description: String {
            "the zone lost changes this store had applied (it was at change \(formerPosition), the zone's head was "
                + "\(serverHead)); joined again on \(date.formatted(.iso8601)), uploading every model it holds"
        }
    }

    /// A status.
    public init() {}
}

/// An error of sync. Its message names the server by host, port, user and
/// database, never by password.
public struct SyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of error it is.
    public enum Code: String, Sendable {
        /// A configuration sync cannot use, or a container it cannot sync.
        case configuration
        /// The server cannot be reached, or the connection broke.
        case unreachable
        /// The server refused the login.
        case authentication
        /// The login role may not read the zone, or may not write it (a
        /// push or a trim in a zone shared read-only). Nothing local is
        /// changed or dropped: saves go on, and sync resumes once the
        /// zone's owner grants access (`strata sync-server grant`).
        case forbidden
        /// The server has no `strata_sync` layout, or one of another
        /// version than this StrataSync's: an operator installs or upgrades
        /// it with `strata sync-server install` (or
        /// ``SyncServer/install()``). Devices never create it.
        case serverLayout
        /// The server answered with an error.
        case server
        /// Something the server sent cannot be used: the zone's changes
        /// are not in order, a snapshot does not decode, a recorded schema
        /// does not parse. The store is unchanged. (A single change that
        /// cannot be applied does not stop sync: it is set aside, see
        /// ``SyncStatus/setAside``.)
        case damagedServerChange
        /// The zone holds changes of a schema this store's schema cannot
        /// share a zone with (an attribute of another type, a required
        /// attribute the other lacks). Found when sync starts, before
        /// anything is sent or applied.
        case incompatibleSchema
        /// The local store failed (an I/O error, a constraint of the
        /// schema).
        case store
        /// Sync was stopped before the round ended.
        case stopped
    }

    /// What kind of error it is.
    public let code: Code
    /// What happened and where.
    public let message: String

    /// An error of kind `code`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The code, then the message.
    public var description: String { "\(code.rawValue): \(message)" }
}
