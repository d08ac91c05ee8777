/// Runs a ``ModelContext``'s work; a `@ModelActor` actor runs on one.
public protocol ModelExecutor: AnyObject, Sendable {
    var modelContext: ModelContext { get }
}

/// A model executor that is also a serial executor for actors.
public protocol SerialModelExecutor: ModelExecutor, SerialExecutor {}

/// Runs jobs one at a time on a private dispatch queue, so that the
/// actor's context is only ever used from one thread at a time.
public final class DefaultSerialModelExecutor: SerialModelExecutor, @unchecked Sendable {
    public let modelContext: ModelContext
    private let queue = DispatchQueue(label: "strata.model-executor")

    public init(modelContext: ModelContext) { self.modelContext = modelContext }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

/// An actor with its own context on a container (made by `@ModelActor`).
public protocol ModelActor: Actor {
    nonisolated var modelContainer: ModelContainer { get }
    nonisolated var modelExecutor: any ModelExecutor { get }
}

extension ModelActor {
    /// The actor's context; use it only on the actor.
    public var modelContext: ModelContext { modelExecutor.modelContext }

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        guard let serial = modelExecutor as? any SerialModelExecutor else {
            preconditionFailure("a ModelActor's executor must be a SerialModelExecutor")
        }
        return serial.asUnownedSerialExecutor()
    }
}
