#if Sync
    import Logging
#endif

/// Where StrataSync tells what it does: the swift-log `Logger` an app gave
/// ``SyncEngine/init(container:configuration:logger:)``, nowhere otherwise
/// (StrataSync prints nothing of its own).
struct SyncLog: Sendable {
    enum Level {
        case debug, info, warning, error
    }

    #if Sync
        let logger: Logger?
    #endif

    /// Tells nothing.
    static var silent: SyncLog {
        #if Sync
            SyncLog(logger: nil)
        #else
            SyncLog()
        #endif
    }

    /// Writes `message` at `level`, with the zone as metadata.
    func callAsFunction(_ level: Level, _ message: @autoclosure () -> String, zone: String) {
        #if Sync
            guard let logger else { return }
            let text = Logger.Message(stringLiteral: message())
            let metadata: Logger.Metadata = ["zone": .string(zone)]
            switch level {
            case .debug: logger.debug(text, metadata: metadata)
            case .info: logger.info(text, metadata: metadata)
            case .warning: logger.warning(text, metadata: metadata)
            case .error: logger.error(text, metadata: metadata)
            }
        #endif
    }
}
