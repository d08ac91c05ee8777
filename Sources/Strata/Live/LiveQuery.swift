import Foundation
import Observation

/// A fetch's results that stay current: an `Observable` object whose
/// ``results`` are read again, when next read, after a commit that can
/// change them (the commits ``LiveResults`` follows, filtered the same
/// way). What `@Query` is built on; use it where a SwiftUI-style model
/// object suits better than a sequence.
///
/// Reading ``results`` registers with Observation: `withObservationTracking`
/// (or SwiftUI) is told of a change as soon as a commit that can change the
/// results returns, on the thread that committed (the watcher thread, for
/// another process's save); the fetch runs again on the thread that next
/// reads ``results`` — which must be its context's — and only then, so
/// commits between two reads cost one fetch. A handler may read the store,
/// but should hand longer work to its own queue or actor.
public final class LiveQuery<Element: PersistentModel>: Observable {
    /// What is fetched.
    public let descriptor: FetchDescriptor<Element>
    /// The context that fetches, and whose models ``results`` holds.
    public let modelContext: ModelContext
    private let registrar = ObservationRegistrar()
    private var observer: LiveObserver?
    private var cached: [Element] = []
    private var error: (any Error)?
    private var loaded = false

    /// Starts observing `descriptor`'s results in `context`.
    public init(_ descriptor: FetchDescriptor<Element> = FetchDescriptor(), in context: ModelContext) {
        self.descriptor = descriptor
        self.modelContext = context
        let sequence = context.liveResults(descriptor)
        // Set before the observer registers: a commit may reach it at once.
        let notifier = Notifier()
        notifier.query = self
        observer = LiveObserver(
            sequence.dependencies, container: context.container, hub: sequence.storeContext.container.mergeHub,
            onChange: { notifier.changed() })
        if context.container.isClosed { observer?.end() }
    }

    /// The models matching ``descriptor``, fetched again if a commit may
    /// have changed them since the last read; empty when the fetch threw
    /// (see ``fetchError``).
    public var results: [Element] {
        registrar.access(self, keyPath: \.results)
        refreshIfChanged()
        return cached
    }

    /// The error the last fetch threw, if it threw.
    public var fetchError: (any Error)? {
        registrar.access(self, keyPath: \.fetchError)
        refreshIfChanged()
        return error
    }

    /// Fetches again now, changed or not.
    public func refresh() {
        do {
            cached = try modelContext.fetch(descriptor)
            error = nil
        } catch {
            cached = []
            self.error = error
        }
        loaded = true
    }

    private func refreshIfChanged() {
        let changed = observer?.takeChange() ?? false
        if changed || !loaded {
            if let observer, observer.hasEnded, loaded { return }
            refresh()
        }
    }

    /// Tells Observation, from a committing thread, that the results may
    /// have changed.
    fileprivate func announceChange() {
        registrar.withMutation(of: self, keyPath: \.results) {}
        registrar.withMutation(of: self, keyPath: \.fetchError) {}
    }

    /// Reaches the query from the committing thread without keeping it
    /// alive. `query` is set once, before any commit can reach it.
    private final class Notifier: @unchecked Sendable {
        weak var query: LiveQuery<Element>?

        func changed() { query?.announceChange() }
    }
}

/// Where `@Query` finds its context outside SwiftUI, whose environment
/// gives it one there (`.modelContainer(_:)`, `.modelContext(_:)`).
///
/// Set ``modelContext`` once when the program starts, usually to the
/// container's `mainContext`; a `@Query` read while it is nil returns no
/// models and reports ``SwiftDataError/missingModelContext`` in its
/// `fetchError`, as SwiftData's does outside a view with a container.
@MainActor public enum QueryEnvironment {
    /// The context `@Query` properties read from.
    public static var modelContext: ModelContext?

    /// Runs `body` with ``modelContext`` set to `context`, then restores it.
    public static func withModelContext<R>(_ context: ModelContext, _ body: () throws -> R) rethrows -> R {
        let previous = modelContext
        modelContext = context
        defer { modelContext = previous }
        return try body()
    }
}

/// The live results of a fetch, as a property: what SwiftData's `@Query`
/// macro keeps in the peer `_name` of the property it is attached to.
///
/// The ``wrappedValue`` is the models matching the query in the context of
/// ``QueryEnvironment/modelContext`` (SwiftUI's environment provides it in
/// apps), fetched again when read after a commit that can change them.
/// `transaction` and `animation` are accepted and ignored: there is no
/// user interface to animate. An initializer of the type holding the
/// property may set the peer, as in SwiftData:
/// `_trips = Query(filter: #Predicate { $0.city == city })`.
@MainActor @preconcurrency
public struct Query<Element: PersistentModel, Result> {
    private let descriptor: FetchDescriptor<Element>
    private let storage: QueryStorage<Element>
    private let shape: ([Element]) -> Result

    /// The models matching the query, current as of this read.
    public var wrappedValue: Result { shape(storage.query(descriptor)?.results ?? []) }

    /// The context the query reads from; nil when none is set (SwiftData
    /// returns an empty store's context there).
    public var modelContext: ModelContext? { QueryEnvironment.modelContext }

    /// The error the last fetch threw, if any.
    public var fetchError: (any Error)? {
        guard let query = storage.query(descriptor) else {
            return SwiftDataError(
                .missingModelContext, "@Query of \(Element.self) has no context: set QueryEnvironment.modelContext")
        }
        return query.fetchError
    }

    private init(descriptor: FetchDescriptor<Element>, shape: @escaping ([Element]) -> Result) {
        self.descriptor = descriptor
        self.storage = QueryStorage()
        self.shape = shape
    }

    /// A query of every model of `Element`.
    public init() where Result == [Element] {
        self.init(descriptor: FetchDescriptor(), shape: { $0 })
    }

    /// A query of `descriptor`.
    public init(_ descriptor: FetchDescriptor<Element>, transaction: Transaction? = nil) where Result == [Element] {
        self.init(descriptor: descriptor, shape: { $0 })
    }

    /// A query of `descriptor`.
    public init(_ descriptor: FetchDescriptor<Element>, animation: Animation) where Result == [Element] {
        self.init(descriptor: descriptor, shape: { $0 })
    }

    /// A query with a predicate and sort descriptors.
    public init(
        filter: Predicate<Element>? = nil, sort descriptors: [SortDescriptor<Element>] = [],
        transaction: Transaction? = nil
    ) where Result == [Element] {
        self.init(descriptor: FetchDescriptor(predicate: filter, sortBy: descriptors), shape: { $0 })
    }

    /// A query with a predicate and sort descriptors.
    public init(filter: Predicate<Element>? = nil, sort descriptors: [SortDescriptor<Element>] = [], animation: Animation)
    where Result == [Element] {
        self.init(descriptor: FetchDescriptor(predicate: filter, sortBy: descriptors), shape: { $0 })
    }

    /// A query with a predicate, sorted by one property.
    public init<Value: Comparable>(
        filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value> & Sendable, order: SortOrder = .forward,
        transaction: Transaction? = nil
    ) where Result == [Element] {
        self.init(
            descriptor: FetchDescriptor(predicate: filter, sortBy: [SortDescriptor(keyPath, order: order)]), shape: { $0 })
    }

    /// A query with a predicate, sorted by one optional property.
    public init<Value: Comparable>(
        filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value?> & Sendable, order: SortOrder = .forward,
        transaction: Transaction? = nil
    ) where Result == [Element] {
        self.init(
            descriptor: FetchDescriptor(predicate: filter, sortBy: [SortDescriptor(keyPath, order: order)]), shape: { $0 })
    }

    /// A query with a predicate, sorted by one property.
    public init<Value: Comparable>(
        filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value> & Sendable, order: SortOrder = .forward,
        animation: Animation
    ) where Result == [Element] {
        self.init(filter: filter, sort: keyPath, order: order, transaction: nil)
    }

    /// A query with a predicate, sorted by one optional property.
    public init<Value: Comparable>(
        filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value?> & Sendable, order: SortOrder = .forward,
        animation: Animation
    ) where Result == [Element] {
        self.init(filter: filter, sort: keyPath, order: order, transaction: nil)
    }
}

/// Makes the property the live results of a fetch of every model of its
/// element type (SwiftData's `@Query`):
///
/// ```swift
/// @Query var trips: [Trip]
/// @Query(sort: \Trip.startDate, order: .reverse) var latest: [Trip]
/// @Query(filter: #Predicate<Trip> { $0.isFavorite }, sort: [SortDescriptor(\Trip.name)]) var favorites: [Trip]
/// @Query(FetchDescriptor<Trip>(predicate: #Predicate { $0.isFavorite })) var alsoFavorites: [Trip]
/// ```
///
/// The property becomes read-only, backed by a ``Query`` in the peer
/// `_name`; see ``Query`` and ``QueryEnvironment`` for where its context
/// comes from.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query(transaction: Transaction? = nil) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// ``Query(transaction:)``, animated (the animation is ignored).
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query(animation: Animation) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of `descriptor`.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Element: PersistentModel>(_ descriptor: FetchDescriptor<Element>, transaction: Transaction? = nil) =
    #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of `descriptor`.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Element: PersistentModel>(_ descriptor: FetchDescriptor<Element>, animation: Animation) =
    #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of a predicate, sorted by `descriptors`.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Element: PersistentModel>(
    filter: Predicate<Element>? = nil, sort descriptors: [SortDescriptor<Element>] = [], transaction: Transaction? = nil
) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of a predicate, sorted by `descriptors`.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Element: PersistentModel>(
    filter: Predicate<Element>? = nil, sort descriptors: [SortDescriptor<Element>] = [], animation: Animation
) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of a predicate, sorted by one property.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Value: Comparable, Element: PersistentModel>(
    filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value> & Sendable, order: SortOrder = .forward,
    transaction: Transaction? = nil
) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of a predicate, sorted by one optional property.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Value: Comparable, Element: PersistentModel>(
    filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value?> & Sendable, order: SortOrder = .forward,
    transaction: Transaction? = nil
) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of a predicate, sorted by one property.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Value: Comparable, Element: PersistentModel>(
    filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value> & Sendable, order: SortOrder = .forward,
    animation: Animation
) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// The live results of a predicate, sorted by one optional property.
@attached(accessor) @attached(peer, names: prefixed(_))
public macro Query<Value: Comparable, Element: PersistentModel>(
    filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value?> & Sendable, order: SortOrder = .forward,
    animation: Animation
) = #externalMacro(module: "StrataMacros", type: "QueryMacro")

/// A `@Query`'s live query, made on first read in the context then set.
@MainActor final class QueryStorage<Element: PersistentModel> {
    private var live: LiveQuery<Element>?

    func query(_ descriptor: FetchDescriptor<Element>) -> LiveQuery<Element>? {
        guard let context = QueryEnvironment.modelContext else { return nil }
        if let live, live.modelContext === context { return live }
        let made = LiveQuery(descriptor, in: context)
        live = made
        return made
    }
}

#if canImport(SwiftUI)
    import SwiftUI
#else
    /// SwiftUI's transaction, which Linux lacks: `@Query(transaction:)`
    /// takes one so that shared code compiles, and ignores it.
    public struct Transaction: Sendable {
        /// The animation of the changes; unused.
        public var animation: Animation?
        /// Whether animations are off; unused.
        public var disablesAnimations = false

        /// A transaction without an animation.
        public init() {}

        /// A transaction with `animation`.
        public init(animation: Animation?) { self.animation = animation }
    }

    /// SwiftUI's animation, which Linux lacks: `@Query(animation:)` takes
    /// one so that shared code compiles, and ignores it.
    public struct Animation: Sendable, Equatable {
        private let name: String

        private init(_ name: String) { self.name = name }

        /// An animation named as SwiftUI's `default`; unused.
        public static let `default` = Animation("default")
        /// An animation named as SwiftUI's `linear`; unused.
        public static let linear = Animation("linear")
        /// An animation named as SwiftUI's `easeIn`; unused.
        public static let easeIn = Animation("easeIn")
        /// An animation named as SwiftUI's `easeOut`; unused.
        public static let easeOut = Animation("easeOut")
        /// An animation named as SwiftUI's `easeInOut`; unused.
        public static let easeInOut = Animation("easeInOut")
        /// An animation named as SwiftUI's `spring`; unused.
        public static let spring = Animation("spring")
        /// An animation named as SwiftUI's `smooth`; unused.
        public static let smooth = Animation("smooth")
        /// An animation named as SwiftUI's `snappy`; unused.
        public static let snappy = Animation("snappy")
        /// An animation named as SwiftUI's `bouncy`; unused.
        public static let bouncy = Animation("bouncy")

        /// An animation named as SwiftUI's `linear`; unused.
        public static func linear(duration: Double) -> Animation { Animation("linear(\(duration))") }
        /// An animation named as SwiftUI's `easeIn`; unused.
        public static func easeIn(duration: Double) -> Animation { Animation("easeIn(\(duration))") }
        /// An animation named as SwiftUI's `easeOut`; unused.
        public static func easeOut(duration: Double) -> Animation { Animation("easeOut(\(duration))") }
        /// An animation named as SwiftUI's `easeInOut`; unused.
        public static func easeInOut(duration: Double) -> Animation { Animation("easeInOut(\(duration))") }
    }
#endif
