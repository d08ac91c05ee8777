/// The errors of the model layer, named as SwiftData names them where
/// SwiftData has a name (`SwiftDataError.unsupportedPredicate`, …), plus
/// Strata's own where SwiftData reports the condition otherwise or not at
/// all (a damaged record, a read-only store, a unique constraint, a row
/// another save deleted). Strata's detail is in ``message``.
///
/// Two errors are equal when their codes are equal, so that
/// `catch let error as SwiftDataError where error == .readOnlyStore` works;
/// ``message`` says what happened and where.
public struct SwiftDataError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kinds of error: SwiftData's names, where it has one, and Strata's
    /// own.
    public enum Code: String, Hashable, Sendable {
        /// The container cannot open its stores: a file cannot be opened, a
        /// file is already open in this process with another schema (or
        /// read-only, when this container writes), or its configurations cannot
        /// work together (a relationship between two stores, two configurations
        /// on one file, a migration plan with several configurations), or the
        /// store was written with a schema that differs from the container's
        /// and no migration applies (the message names each difference).
        case loadIssueModelContainer
        /// The schema's declarations are invalid: an index or unique constraint
        /// that is empty or names an unknown, unkeyable or relationship
        /// property; `.externalStorage` on an attribute that is not Data; or a
        /// relationship or `.externalStorage` attribute declared `let`.
        case unknownSchema
        /// A configuration's schema does not fit the container's: it names no
        /// model type, a type the container's schema lacks or another
        /// configuration names; or a model type is in no configuration.
        case configurationSchemaNotFoundInContainerSchema
        /// A change breaks a rule of the models: a `.deny` delete rule, a
        /// non-optional relationship left without a target, a to-many model
        /// count bound, a model inserted into a second context; also a custom
        /// migration stage's `didMigrate` that leaves a required attribute
        /// unset, and an `enumerate` block that leaves unsaved changes.
        case modelValidationFailure
        /// A predicate uses an expression Strata cannot evaluate.
        case unsupportedPredicate
        /// SwiftData's code for a sort descriptor it cannot apply. Strata does
        /// not throw it at present.
        case unsupportedSortDescriptor
        /// `fetch(_:batchSize:)` with `includePendingChanges` while the context
        /// has unsaved changes.
        case includePendingChangesWithBatchSize
        /// The store is at a later version of the migration plan than the
        /// container's schema.
        case backwardMigration
        /// A history fetch compares with a token older than deleted history:
        /// what happened after that token is no longer complete.
        case historyTokenExpired
        /// A key path that names no stored property of the model (in
        /// `propertiesToFetch`, say), or names one where it cannot be used.
        case unsupportedKeyPath
        /// SwiftData's code for sorting unsaved changes in a fetch of
        /// identifiers. Strata sorts them, and does not throw it.
        case sortingPendingChangesWithIdentifiers
        /// Two configurations with one name in a container.
        case duplicateConfiguration
        /// A configuration's name too long for a store file's name.
        case configurationFileNameTooLong
        /// A configuration's name that cannot be a file's name (a `/` or a
        /// NUL).
        case configurationFileNameContainsInvalidCharacters
        /// An operation that needs the model's context on a model that has
        /// none (never inserted, or detached by the save of its delete).
        case missingModelContext
        /// A history fetch whose descriptor Strata cannot run.
        case invalidTransactionFetchRequest
        /// Saving through a configuration with `allowsSave: false` (and
        /// `deleteHistory` or `deleteAllData` on such a store).
        case readOnlyStore
        /// A record's bytes cannot be decoded.
        case corruptRecord
        /// A model type the container's schema does not include.
        case unknownModelType
        /// A save would give two rows the same values of a unique
        /// constraint, where no upsert applies (a changed model taking
        /// another row's values, or an insert matching two different rows).
        case uniqueConstraintViolation
        /// A save would write a model whose row another context's save
        /// deleted: the save writes nothing rather than re-create the row.
        /// Roll the change back, or delete the model in this context too.
        case modelDeleted
    }

    /// What kind of error it is; two errors are equal when their codes are.
    public let code: Code
    /// What happened and where; empty in the static values used to compare
    /// errors.
    public let message: String

    /// An error of kind `code`, with `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Two errors are equal when their codes are, whatever their messages.
    public static func == (a: SwiftDataError, b: SwiftDataError) -> Bool { a.code == b.code }
    /// Hashes the code only, as `==` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The code's name, then the message.
    public var description: String { "\(code.rawValue): \(message)" }

    /// An error of code `.loadIssueModelContainer` with no message, to compare
    /// a thrown error with `==`.
    public static let loadIssueModelContainer = SwiftDataError(.loadIssueModelContainer, "")
    /// An error of code `.unknownSchema` with no message, to compare a thrown
    /// error with `==`.
    public static let unknownSchema = SwiftDataError(.unknownSchema, "")
    /// An error of code `.configurationSchemaNotFoundInContainerSchema` with no
    /// message, to compare a thrown error with `==`.
    public static let configurationSchemaNotFoundInContainerSchema = SwiftDataError(
        .configurationSchemaNotFoundInContainerSchema, "")
    /// An error of code `.modelValidationFailure` with no message, to compare a
    /// thrown error with `==`.
    public static let modelValidationFailure = SwiftDataError(.modelValidationFailure, "")
    /// An error of code `.unsupportedPredicate` with no message, to compare a
    /// thrown error with `==`.
    public static let unsupportedPredicate = SwiftDataError(.unsupportedPredicate, "")
    /// An error of code `.unsupportedSortDescriptor` with no message, to
    /// compare a thrown error with `==`.
    public static let unsupportedSortDescriptor = SwiftDataError(.unsupportedSortDescriptor, "")
    /// An error of code `.includePendingChangesWithBatchSize` with no message,
    /// to compare a thrown error with `==`.
    public static let includePendingChangesWithBatchSize = SwiftDataError(.includePendingChangesWithBatchSize, "")
    /// An error of code `.backwardMigration` with no message, to compare a
    /// thrown error with `==`.
    public static let backwardMigration = SwiftDataError(.backwardMigration, "")
    /// An error of code `.historyTokenExpired` with no message, to compare a
    /// thrown error with `==`.
    public static let historyTokenExpired = SwiftDataError(.historyTokenExpired, "")
    /// An error of code `.readOnlyStore` with no message, to compare a thrown
    /// error with `==`.
    public static let readOnlyStore = SwiftDataError(.readOnlyStore, "")
    /// A store written with a schema that differs from the container's, where
    /// no migration applies: SwiftData throws ``loadIssueModelContainer`` for
    /// it, and so does Strata (the message names each difference).
    @available(*, deprecated, renamed: "loadIssueModelContainer")
    public static let schemaMismatch = SwiftDataError(.loadIssueModelContainer, "")
    /// An error of code `.corruptRecord` with no message, to compare a thrown
    /// error with `==`.
    public static let corruptRecord = SwiftDataError(.corruptRecord, "")
    /// An error of code `.unknownModelType` with no message, to compare a
    /// thrown error with `==`.
    public static let unknownModelType = SwiftDataError(.unknownModelType, "")
    /// An error of code `.uniqueConstraintViolation` with no message, to
    /// compare a thrown error with `==`.
    public static let uniqueConstraintViolation = SwiftDataError(.uniqueConstraintViolation, "")
    /// An error of code `.modelDeleted` with no message, to compare a thrown
    /// error with `==`.
    public static let modelDeleted = SwiftDataError(.modelDeleted, "")
    /// An error of code `.unsupportedKeyPath` with no message, to compare a thrown error
    /// with `==`.
    public static let unsupportedKeyPath = SwiftDataError(.unsupportedKeyPath, "")
    /// An error of code `.sortingPendingChangesWithIdentifiers` with no message, to compare a thrown error
    /// with `==`.
    public static let sortingPendingChangesWithIdentifiers = SwiftDataError(.sortingPendingChangesWithIdentifiers, "")
    /// An error of code `.duplicateConfiguration` with no message, to compare a thrown error
    /// with `==`.
    public static let duplicateConfiguration = SwiftDataError(.duplicateConfiguration, "")
    /// An error of code `.configurationFileNameTooLong` with no message, to compare a thrown error
    /// with `==`.
    public static let configurationFileNameTooLong = SwiftDataError(.configurationFileNameTooLong, "")
    /// An error of code `.configurationFileNameContainsInvalidCharacters` with no message, to compare a thrown error
    /// with `==`.
    public static let configurationFileNameContainsInvalidCharacters = SwiftDataError(
        .configurationFileNameContainsInvalidCharacters, "")
    /// An error of code `.missingModelContext` with no message, to compare a thrown error
    /// with `==`.
    public static let missingModelContext = SwiftDataError(.missingModelContext, "")
    /// An error of code `.invalidTransactionFetchRequest` with no message, to compare a thrown error
    /// with `==`.
    public static let invalidTransactionFetchRequest = SwiftDataError(.invalidTransactionFetchRequest, "")

    /// Whether `error` is a ``SwiftDataError`` with `pattern`'s code, so
    /// that `catch SwiftDataError.loadIssueModelContainer` and
    /// `case SwiftDataError.unsupportedPredicate:` match, as in SwiftData.
    public static func ~= (pattern: SwiftDataError, error: any Error) -> Bool {
        (error as? SwiftDataError)?.code == pattern.code
    }
}
