import Foundation

/// A position in a store's history. Tokens order transactions: a later
/// save has a greater token.
public protocol HistoryToken: Codable, Comparable, Hashable, Sendable {}

/// The token of a ``DefaultHistoryTransaction``: the store's save counter
/// at that save. Keep it (it is Codable) to fetch what happened after it.
public struct DefaultHistoryToken: HistoryToken, CustomStringConvertible {
    /// The store the token belongs to.
    public let storeIdentifier: String
    /// The save's number in the store; the first save is 1.
    public let tokenValue: Int64

    init(storeIdentifier: String, tokenValue: Int64) {
        self.storeIdentifier = storeIdentifier
        self.tokenValue = tokenValue
    }

    /// Orders tokens by save number (tokens of one store, as the history
    /// of one store is ordered); tokens of different stores with one
    /// number order by store identifier, and are never equal.
    public static func < (a: Self, b: Self) -> Bool {
        (a.tokenValue, a.storeIdentifier) < (b.tokenValue, b.storeIdentifier)
    }
    /// Two tokens are equal when they have the same save number in the same
    /// store.
    public static func == (a: Self, b: Self) -> Bool {
        a.tokenValue == b.tokenValue && a.storeIdentifier == b.storeIdentifier
    }
    /// Hashes the save number and the store.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(tokenValue)
        hasher.combine(storeIdentifier)
    }

    /// The save number, as `DefaultHistoryToken(n)`.
    public var description: String { "DefaultHistoryToken(\(tokenValue))" }
}

/// One save as the history recorded it.
public protocol HistoryTransaction: Hashable, Identifiable, Sendable {
    /// The type of the transaction's token.
    associatedtype Token: HistoryToken
    /// The transaction's position in its store's history.
    var token: Token { get }
    /// The saving context's ``ModelContext/author``.
    var author: String? { get }
    /// When the save happened.
    var timestamp: Date { get }
    /// The models the save inserted, updated and deleted.
    var changes: [HistoryChange] { get }
    /// The transaction's number in its store.
    var transactionIdentifier: Int64 { get }
    /// The store the transaction was recorded in.
    var storeIdentifier: String { get }
    /// The saving app's bundle identifier.
    var bundleIdentifier: String { get }
    /// The saving process's identifier.
    var processIdentifier: String { get }
}

/// The history transaction Strata records for each save.
public struct DefaultHistoryTransaction: HistoryTransaction, @unchecked Sendable {
    /// The save's token.
    public let token: DefaultHistoryToken
    /// The saving context's `author`; nil when it had none.
    public let author: String?
    /// When the save recorded its history, by the clock of the saving machine.
    public let timestamp: Date
    /// The inserted, updated and deleted models, in that order.
    public let changes: [HistoryChange]
    /// The save's number in its store: the token's `tokenValue`.
    public var transactionIdentifier: Int64 { token.tokenValue }
    /// The store the save wrote: the token's `storeIdentifier`.
    public var storeIdentifier: String { token.storeIdentifier }
    /// The saving process's name (Strata has no bundles).
    public let bundleIdentifier: String
    /// The saving process's name, the same as `bundleIdentifier` (not a process
    /// id).
    public let processIdentifier: String
    /// The save's number in its store (`tokenValue`). Transactions of different
    /// stores can have the same one.
    public var id: Int64 { token.tokenValue }

    /// Two transactions are equal when their tokens are.
    public static func == (a: Self, b: Self) -> Bool { a.token == b.token }
    /// Hashes the token.
    public func hash(into hasher: inout Hasher) { hasher.combine(token) }
}

/// One model's change in a history transaction.
public enum HistoryChange: @unchecked Sendable {
    /// A model the save inserted.
    case insert(any HistoryInsert)
    /// A model the save updated.
    case update(any HistoryUpdate)
    /// A model the save deleted.
    case delete(any HistoryDelete)

    /// The identifier of the inserted, updated or deleted model.
    public var changedPersistentIdentifier: PersistentIdentifier {
        switch self {
        case .insert(let change): return change.changedPersistentIdentifier
        case .update(let change): return change.changedPersistentIdentifier
        case .delete(let change): return change.changedPersistentIdentifier
        }
    }
}

/// A model inserted by a save.
public protocol HistoryInsert<Model> {
    /// The inserted model's type.
    associatedtype Model: PersistentModel
    /// The inserted model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's number within its transaction.
    var changeIdentifier: Int64 { get }
    /// The number of the transaction the change belongs to.
    var transactionIdentifier: Int64 { get }
}

/// A model updated by a save, with the attributes whose stored values
/// changed.
public protocol HistoryUpdate<Model> {
    /// The updated model's type.
    associatedtype Model: PersistentModel
    /// The updated model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's number within its transaction.
    var changeIdentifier: Int64 { get }
    /// The number of the transaction the change belongs to.
    var transactionIdentifier: Int64 { get }
    /// The properties whose stored values the save changed.
    var updatedAttributes: [PartialKeyPath<Model>] { get }
}

/// A model deleted by a save, with the values of its
/// `.preserveValueOnDeletion` attributes.
public protocol HistoryDelete<Model> {
    /// The deleted model's type.
    associatedtype Model: PersistentModel
    /// The deleted model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's number within its transaction.
    var changeIdentifier: Int64 { get }
    /// The number of the transaction the change belongs to.
    var transactionIdentifier: Int64 { get }
    /// The values of the deleted model's `.preserveValueOnDeletion` attributes.
    var tombstone: HistoryTombstone<Model> { get }
}

/// The insert of a model of type `Model`, as Strata records it.
public struct DefaultHistoryInsert<Model: PersistentModel>: HistoryInsert {
    /// The inserted model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's number within its transaction, from 1, in the order the
    /// save recorded its changes.
    public let changeIdentifier: Int64
    /// The number of the save that made the change (its token's `tokenValue`).
    public let transactionIdentifier: Int64
}

/// The update of a model of type `Model`, as Strata records it.
public struct DefaultHistoryUpdate<Model: PersistentModel>: HistoryUpdate {
    /// The updated model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's number within its transaction, from 1, in the order the
    /// save recorded its changes.
    public let changeIdentifier: Int64
    /// The number of the save that made the change (its token's `tokenValue`).
    public let transactionIdentifier: Int64
    /// The key paths of the properties whose stored values the save changed.
    public let updatedAttributes: [PartialKeyPath<Model>]
}

/// The delete of a model of type `Model`, as Strata records it.
public struct DefaultHistoryDelete<Model: PersistentModel>: HistoryDelete {
    /// The deleted model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's number within its transaction, from 1, in the order the
    /// save recorded its changes.
    public let changeIdentifier: Int64
    /// The number of the save that made the change (its token's `tokenValue`).
    public let transactionIdentifier: Int64
    /// The values the model's `.preserveValueOnDeletion` attributes had when it
    /// was deleted.
    public let tombstone: HistoryTombstone<Model>
}

/// The values a deleted model's `.preserveValueOnDeletion` attributes had.
public struct HistoryTombstone<Model: PersistentModel>: Sequence, @unchecked Sendable {
    /// Values by attribute name, of the attribute's declared type.
    let values: [String: Any]

    /// The preserved value of `keyPath`; nil when the attribute is not
    /// preserved (or was nil).
    public subscript<Value>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        guard let name = Model.schemaMetadata.first(where: { $0.keypath == keyPath })?.name else { return nil }
        return values[name] as? Value
    }

    /// Each preserved attribute's key path and value.
    public func makeIterator() -> some IteratorProtocol<(keyPath: PartialKeyPath<Model>, value: Any)> {
        Model.schemaMetadata.compactMap { metadata -> (keyPath: PartialKeyPath<Model>, value: Any)? in
            guard let value = values[metadata.name], let keyPath = metadata.keypath as? PartialKeyPath<Model> else {
                return nil
            }
            return (keyPath, value)
        }.makeIterator()
    }
}

/// Which history transactions ``ModelContext/fetchHistory(_:)`` returns
/// or ``ModelContext/deleteHistory(_:)`` removes.
public struct HistoryDescriptor<T: HistoryTransaction> {
    /// Which transactions to select; nil selects all of them.
    public var predicate: Predicate<T>?
    /// Ascending token order when empty (with several stores: by timestamp,
    /// then store, then token).
    public var sortBy: [SortDescriptor<T>]
    /// The most transactions selected, after sorting; nil for no limit. Unlike
    /// `FetchDescriptor`'s, a limit of 0 (or less) selects none.
    public var fetchLimit: Int?

    /// A descriptor that selects the transactions matching `predicate` (all of
    /// them when it is nil), sorted by `sortBy`.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}

/// Who is editing through a context (SwiftData's `EditingState`): the
/// context's ``ModelContext/author`` under an identifier of its own.
public struct EditingState: Hashable, Identifiable, Sendable {
    /// Identifies the context the state belongs to.
    public let id: UUID
    /// The author recorded with the context's saves.
    public var author: String?
}

extension ModelContext {
    /// The context's editing state: its author, recorded with each save's
    /// history. Setting it sets ``author``.
    public var editingState: EditingState {
        get { EditingState(id: editingStateID, author: author) }
        set { author = newValue.author }
    }
}
