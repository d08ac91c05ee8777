#!/usr/bin/env python3
"""Strata's status for every symbol of SwiftData's documented surface.

Reads `swiftdata-symbols.tsv` (Apple's symbol pages; see README-surface.md)
and the rows below that Apple's Topics lists link without a retrievable page,
gives each symbol a status, and writes:

- `surface-status.tsv`: path, kind, introduced, declaration, status, note;
- `Sources/Strata/Strata.docc/SwiftDataSurface.md`: the symbols Strata does
  not provide, by reason;
- `../FidelityTests/SurfaceCensus.swift`: one compile-time check per symbol
  Strata provides, written with SwiftData's signature (labels, `throws`,
  optionality, generic constraints, `Sendable`, isolation). The fidelity
  suites compile it in all four language settings.

Statuses: `provided` (checked), or a reason it is not: `swiftui`, `datastore`,
`backing-data`, `ios27`, `schema-builder`, `differs` (see the "Differences
from SwiftData" article, which lists each with its reason).

Run from the package root: `python3 Tests/Census/surface.py` (CI runs it
and fails when the checked-in outputs differ).
"""

import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Linked from Apple's Topics lists, page not in the corpus: declaration as
# the Topics list or the SDK interface gives it.
LINKED = [
    ("SwiftDataError/historyTokenExpired", "Type Property", "18.0", "static let historyTokenExpired: SwiftDataError"),
    ("SwiftDataError/includePendingChangesWithBatchSize", "Type Property", "17.0",
     "static let includePendingChangesWithBatchSize: SwiftDataError"),
    ("SwiftDataError/sortingPendingChangesWithIdentifiers", "Type Property", "17.0",
     "static let sortingPendingChangesWithIdentifiers: SwiftDataError"),
    ("SwiftDataError/unsupportedKeyPath", "Type Property", "17.0", "static let unsupportedKeyPath: SwiftDataError"),
    ("SwiftDataError/unsupportedPredicate", "Type Property", "17.0", "static let unsupportedPredicate: SwiftDataError"),
    ("SwiftDataError/unsupportedSortDescriptor", "Type Property", "17.0",
     "static let unsupportedSortDescriptor: SwiftDataError"),
    ("SwiftDataError/duplicateConfiguration", "Type Property", "17.0", "static let duplicateConfiguration: SwiftDataError"),
    ("SwiftDataError/configurationFileNameTooLong", "Type Property", "17.0",
     "static let configurationFileNameTooLong: SwiftDataError"),
    ("SwiftDataError/configurationSchemaNotFoundInContainerSchema", "Type Property", "17.0",
     "static let configurationSchemaNotFoundInContainerSchema: SwiftDataError"),
    ("SwiftDataError/modelValidationFailure", "Type Property", "17.0", "static let modelValidationFailure: SwiftDataError"),
    ("SwiftDataError/missingModelContext", "Type Property", "17.0", "static let missingModelContext: SwiftDataError"),
    ("SwiftDataError/~=(_:_:)", "Operator", "18.0", "static func ~= (lhs: SwiftDataError, rhs: any Error) -> Bool"),
    ("ModelContext/NotificationKey/updatedIdentifiers", "Case", "17.0", "case updatedIdentifiers"),
    ("ModelContext/NotificationKey/invalidatedAllIdentifiers", "Case", "17.0", "case invalidatedAllIdentifiers"),
    ("EditingState/author", "Instance Property", "18.0", "var author: String?"),
    ("HistoryDescriptor/predicate", "Instance Property", "18.0", "var predicate: Predicate<TransactionType>?"),
    ("HistoryTransaction/author", "Instance Property", "18.0", "var author: String? { get }"),
    ("HistoryTransaction/storeIdentifier", "Instance Property", "18.0", "var storeIdentifier: String { get }"),
    ("HistoryTransaction/transactionIdentifier-swift.property", "Instance Property", "18.0",
     "var transactionIdentifier: Self.TransactionIdentifier { get }"),
    ("HistoryUpdate/updatedAttributes", "Instance Property", "18.0", "var updatedAttributes: [Self.PropertyUpdate] { get }"),
    ("HistoryTombstone/subscript(_:)", "Instance Subscript", "18.0",
     "subscript(keyPath: PartialKeyPath<Model>) -> (any Sendable)? { get }"),
    ("PersistentIdentifier/ID-swift.struct", "Structure", "16.0", "struct ID"),
    ("Query/init(filter:sort:animation:)", "Initializer", "17.0",
     "@MainActor @preconcurrency init(filter: Predicate<Element>? = nil, sort descriptors: [SortDescriptor<Element>] = [], "
     "animation: Animation) where Result == [Element]"),
    ("Query/init(filter:sort:order:animation:)-3qovd", "Initializer", "17.0",
     "@MainActor @preconcurrency init<Value>(filter: Predicate<Element>? = nil, sort keyPath: KeyPath<Element, Value>, "
     "order: SortOrder = .forward, animation: Animation) where Result == [Element], Value : Comparable"),
    ("Schema/Entity/name", "Instance Property", "17.0", "var name: String"),
    ("Schema/Entity/attributes", "Instance Property", "17.0", "var attributes: Set<Schema.Attribute>"),
    ("Schema/Entity/relationships", "Instance Property", "17.0", "var relationships: Set<Schema.Relationship>"),
    ("Schema/Entity/relationshipsByName", "Instance Property", "17.0",
     "final var relationshipsByName: [String : Schema.Relationship]"),
    ("Schema/Entity/storedProperties", "Instance Property", "17.0", "final var storedProperties: [any SchemaProperty]"),
    ("Schema/Entity/superentity", "Instance Property", "17.0", "final var superentity: Schema.Entity? { get set }"),
    ("Schema/Entity/subentities", "Instance Property", "17.0", "final var subentities: Set<Schema.Entity>"),
    ("Schema/Entity/indices", "Instance Property", "18.0", "final var indices: [[String]]"),
    ("Schema/Version-swift.struct", "Structure", "17.0", "struct Version"),
    ("SchemaMigrationPlan/stages", "Type Property", "17.0", "static var stages: [MigrationStage] { get }"),
    ("ModelExecutor/modelContext", "Instance Property", "17.0", "var modelContext: ModelContext { get }"),
    ("ModelContainer/invalidate()", "Instance Method", "17.0", "func invalidate()"),
    ("ModelContainer/init(for:migrationPlan:configurations:)-array", "Initializer", "17.0",
     "init(for givenSchema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)? = nil, configurations: [ModelConfiguration]) throws"),
]

# Symbol → Swift statements that use it with SwiftData's signature. They are
# compiled, never run: `context`, `container`, `recipe` are parameters of the
# function that holds them.
CHECKS = {
    # Macros: the fidelity model files use each form; these pin the names.
    "Model()": "_ = Recipe.self as any PersistentModel.Type",
    "Attribute(_:originalName:hashModifier:)": "_ = Schema.Attribute(.unique, originalName: \"old\", hashModifier: \"v2\")",
    "Relationship(_:deleteRule:minimumModelCount:maximumModelCount:originalName:inverse:hashModifier:)":
        "_ = Schema.Relationship(deleteRule: .cascade, minimumModelCount: 0, maximumModelCount: 0, originalName: nil, "
        "inverse: \\Ingredient.recipe, hashModifier: nil)",
    "Transient()": "_ = CensusShapes.transientCheck",
    "Unique(_:)": "_ = CensusShapes.uniqueCheck",
    "Index(_:)-74ia2": "_ = CensusShapes.indexCheck",
    "ModelActor()": "_ = CensusActor.self as any ModelActor.Type",
    # @Query: CensusQueries holds a property of each form.
    "Query(transaction:)": "_ = CensusQueries.self",
    "Query(animation:)": "_ = CensusQueries.self",
    "Query(_:animation:)": "_ = CensusQueries.self",
    "Query(filter:sort:transaction:)": "_ = CensusQueries.self",
    "Query(filter:sort:animation:)": "_ = CensusQueries.self",
    "Query(filter:sort:order:transaction:)-8tk8u": "_ = CensusQueries.self",
    "Query": "let _: Query<Recipe, [Recipe]>.Type = Query<Recipe, [Recipe]>.self",
    "Query/wrappedValue": "let _: @MainActor (Query<Recipe, [Recipe]>) -> [Recipe] = { $0.wrappedValue }",
    "Query/fetchError": "let _: @MainActor (Query<Recipe, [Recipe]>) -> (any Error)? = { $0.fetchError }",
    "Query/init(_:animation:)":
        "let _: @MainActor (FetchDescriptor<Recipe>, Animation) -> Query<Recipe, [Recipe]> = { Query($0, animation: $1) }",
    "Query/init(_:transaction:)":
        "let _: @MainActor (FetchDescriptor<Recipe>, Transaction?) -> Query<Recipe, [Recipe]> = "
        "{ Query($0, transaction: $1) }",
    "Query/init(filter:sort:transaction:)":
        "let _: @MainActor (Predicate<Recipe>?, [SortDescriptor<Recipe>], Transaction?) -> Query<Recipe, [Recipe]> = "
        "{ Query(filter: $0, sort: $1, transaction: $2) }",
    "Query/init(filter:sort:animation:)":
        "let _: @MainActor (Predicate<Recipe>?, [SortDescriptor<Recipe>], Animation) -> Query<Recipe, [Recipe]> = "
        "{ Query(filter: $0, sort: $1, animation: $2) }",
    "Query/init(filter:sort:order:animation:)-1qfoj":
        "let _: @MainActor (Predicate<Ingredient>?, Animation) -> Query<Ingredient, [Ingredient]> = "
        "{ Query(filter: $0, sort: \\Ingredient.recipe?.name, order: .reverse, animation: $1) }",
    "Query/init(filter:sort:order:animation:)-3qovd":
        "let _: @MainActor (Predicate<Recipe>?, Animation) -> Query<Recipe, [Recipe]> = "
        "{ Query(filter: $0, sort: \\Recipe.name, order: .reverse, animation: $1) }",
    # ModelContainer
    "ModelContainer/invalidate()": "let _: () -> Void = container.invalidate",
    "ModelContainer": "requireSendable(ModelContainer.self)",
    "ModelContainer/init(for:migrationPlan:configurations:)-8s4ts":
        "let _: (any PersistentModel.Type, (any SchemaMigrationPlan.Type)?, ModelConfiguration) throws -> ModelContainer = "
        "{ try ModelContainer(for: $0, migrationPlan: $1, configurations: $2) }",
    "ModelContainer/init(for:migrationPlan:configurations:)-qof9":
        "let _: (Schema, (any SchemaMigrationPlan.Type)?, ModelConfiguration) throws -> ModelContainer = "
        "{ try ModelContainer(for: $0, migrationPlan: $1, configurations: $2) }",
    "ModelContainer/init(for:migrationPlan:configurations:)-array":
        "let _: (Schema, (any SchemaMigrationPlan.Type)?, [ModelConfiguration]) throws -> ModelContainer = "
        "ModelContainer.init(for:migrationPlan:configurations:)",
    "ModelContainer/configurations": "let _: Set<ModelConfiguration> = container.configurations",
    "ModelContainer/deleteAllData()": "let _: (ModelContainer) -> () -> Void = ModelContainer.deleteAllData",
    "ModelContainer/erase()": "let _: (ModelContainer) -> () throws -> Void = ModelContainer.erase",
    "ModelContainer/migrationPlan": "let _: (any SchemaMigrationPlan.Type)? = container.migrationPlan",
    "ModelContainer/schema": "let _: Schema = container.schema",
    "ModelContainer/mainContext": "_ = CensusShapes.mainContextCheck",
    "ModelContainer/configurationName(forStoreIdentifier:)":
        "let _: (ModelContainer) -> (String) -> String? = ModelContainer.configurationName(forStoreIdentifier:)",
    "ModelContainer/storeIdentifier(forConfigurationNamed:)":
        "let _: (ModelContainer) -> (String) -> String? = ModelContainer.storeIdentifier(forConfigurationNamed:)",
    # ModelConfiguration
    "ModelConfiguration": "requireSendable(ModelConfiguration.self); requireHashable(ModelConfiguration.self)",
    "ModelConfiguration/init(_:schema:isStoredInMemoryOnly:allowsSave:groupContainer:cloudKitDatabase:)":
        "let _: (String?, Schema?, Bool, Bool, ModelConfiguration.GroupContainer, ModelConfiguration.CloudKitDatabase) "
        "-> ModelConfiguration = ModelConfiguration.init(_:schema:isStoredInMemoryOnly:allowsSave:groupContainer:"
        "cloudKitDatabase:)",
    "ModelConfiguration/init(_:schema:url:allowsSave:cloudKitDatabase:)":
        "let _: (String?, Schema?, URL, Bool, ModelConfiguration.CloudKitDatabase) -> ModelConfiguration = "
        "ModelConfiguration.init(_:schema:url:allowsSave:cloudKitDatabase:)",
    "ModelConfiguration/init(for:isStoredInMemoryOnly:)":
        "_ = ModelConfiguration(for: Recipe.self, Ingredient.self, isStoredInMemoryOnly: true)",
    "ModelConfiguration/init(isStoredInMemoryOnly:)":
        "let _: (Bool) -> ModelConfiguration = ModelConfiguration.init(isStoredInMemoryOnly:)",
    "ModelConfiguration/allowsSave": "let _: KeyPath<ModelConfiguration, Bool> = \\.allowsSave",
    "ModelConfiguration/isStoredInMemoryOnly": "let _: KeyPath<ModelConfiguration, Bool> = \\.isStoredInMemoryOnly",
    "ModelConfiguration/url": "let _: KeyPath<ModelConfiguration, URL> = \\.url",
    "ModelConfiguration/groupAppContainerIdentifier":
        "let _: KeyPath<ModelConfiguration, String?> = \\.groupAppContainerIdentifier",
    "ModelConfiguration/cloudKitDatabase-swift.property":
        "let _: KeyPath<ModelConfiguration, ModelConfiguration.CloudKitDatabase> = \\.cloudKitDatabase",
    "ModelConfiguration/groupContainer-swift.property":
        "let _: KeyPath<ModelConfiguration, ModelConfiguration.GroupContainer> = \\.groupContainer",
    "ModelConfiguration/CloudKitDatabase-swift.struct/none":
        "let _: ModelConfiguration.CloudKitDatabase = ModelConfiguration.CloudKitDatabase.none",
    "ModelConfiguration/CloudKitDatabase-swift.struct/private(_:)":
        "let _: (String) -> ModelConfiguration.CloudKitDatabase = ModelConfiguration.CloudKitDatabase.private(_:)",
    "ModelConfiguration/GroupContainer-swift.struct/identifier(_:)":
        "let _: (String) -> ModelConfiguration.GroupContainer = ModelConfiguration.GroupContainer.identifier(_:)",
    # ModelContext
    "ModelContext": "_ = ModelContext.self",
    "ModelContext/init(_:)": "let _: (ModelContainer) -> ModelContext = ModelContext.init(_:)",
    "ModelContext/autosaveEnabled": "let _: ReferenceWritableKeyPath<ModelContext, Bool> = \\.autosaveEnabled",
    "ModelContext/changedModelsArray": "let _: KeyPath<ModelContext, [any PersistentModel]> = \\.changedModelsArray",
    "ModelContext/insertedModelsArray": "let _: KeyPath<ModelContext, [any PersistentModel]> = \\.insertedModelsArray",
    "ModelContext/deletedModelsArray": "let _: KeyPath<ModelContext, [any PersistentModel]> = \\.deletedModelsArray",
    "ModelContext/container": "let _: KeyPath<ModelContext, ModelContainer> = \\.container",
    "ModelContext/hasChanges": "let _: KeyPath<ModelContext, Bool> = \\.hasChanges",
    "ModelContext/editingState": "let _: ReferenceWritableKeyPath<ModelContext, EditingState> = \\.editingState",
    "ModelContext/undoManager": "let _: ReferenceWritableKeyPath<ModelContext, UndoManager?> = \\.undoManager",
    "ModelContext/delete(_:)": "let _: (ModelContext) -> (Recipe) -> Void = ModelContext.delete(_:)",
    "ModelContext/insert(_:)": "let _: (ModelContext) -> (Recipe) -> Void = ModelContext.insert(_:)",
    "ModelContext/delete(model:where:includeSubclasses:)":
        "let _: (ModelContext) -> (Recipe.Type, Predicate<Recipe>?, Bool) throws -> Void = "
        "ModelContext.delete(model:where:includeSubclasses:)",
    "ModelContext/didSave": "let _: Notification.Name = ModelContext.didSave",
    "ModelContext/willSave": "let _: Notification.Name = ModelContext.willSave",
    "ModelContext/enumerate(_:batchSize:allowEscapingMutations:block:)":
        "try context.enumerate(FetchDescriptor<Recipe>(), batchSize: 10, allowEscapingMutations: false) { (_: Recipe) in }",
    "ModelContext/fetch(_:)": "let _: (ModelContext) -> (FetchDescriptor<Recipe>) throws -> [Recipe] = ModelContext.fetch(_:)",
    "ModelContext/fetch(_:batchSize:)":
        "let _: (ModelContext) -> (FetchDescriptor<Recipe>, Int) throws -> FetchResultsCollection<Recipe> = "
        "ModelContext.fetch(_:batchSize:)",
    "ModelContext/fetchCount(_:)": "let _: (ModelContext) -> (FetchDescriptor<Recipe>) throws -> Int = ModelContext.fetchCount(_:)",
    "ModelContext/fetchHistory(_:)":
        "let _: (ModelContext) -> (HistoryDescriptor<DefaultHistoryTransaction>) throws -> [DefaultHistoryTransaction] = "
        "ModelContext.fetchHistory(_:)",
    "ModelContext/fetchIdentifiers(_:)":
        "let _: (ModelContext) -> (FetchDescriptor<Recipe>) throws -> [PersistentIdentifier] = ModelContext.fetchIdentifiers(_:)",
    "ModelContext/fetchIdentifiers(_:batchSize:)":
        "let _: (ModelContext) -> (FetchDescriptor<Recipe>, Int) throws -> FetchResultsCollection<PersistentIdentifier> = "
        "ModelContext.fetchIdentifiers(_:batchSize:)",
    "ModelContext/model(for:)": "let _: (ModelContext) -> (PersistentIdentifier) -> any PersistentModel = ModelContext.model(for:)",
    "ModelContext/processPendingChanges()": "let _: (ModelContext) -> () -> Void = ModelContext.processPendingChanges",
    "ModelContext/registeredModel(for:)": "let _: Recipe? = context.registeredModel(for: recipe.persistentModelID)",
    "ModelContext/rollback()": "let _: (ModelContext) -> () -> Void = ModelContext.rollback",
    "ModelContext/save()": "let _: (ModelContext) -> () throws -> Void = ModelContext.save",
    "ModelContext/transaction(block:)": "let _: (ModelContext) -> (() throws -> Void) throws -> Void = ModelContext.transaction(block:)",
    "ModelContext/NotificationKey": "let _: String = ModelContext.NotificationKey.insertedIdentifiers.rawValue",
    "ModelContext/NotificationKey/deletedIdentifiers": "let _: ModelContext.NotificationKey = .deletedIdentifiers",
    "ModelContext/NotificationKey/insertedIdentifiers": "let _: ModelContext.NotificationKey = .insertedIdentifiers",
    "ModelContext/NotificationKey/updatedIdentifiers": "let _: ModelContext.NotificationKey = .updatedIdentifiers",
    "ModelContext/NotificationKey/queryGeneration": "let _: ModelContext.NotificationKey = .queryGeneration",
    "ModelContext/NotificationKey/invalidatedAllIdentifiers": "let _: ModelContext.NotificationKey = .invalidatedAllIdentifiers",
    # Fetching
    "FetchDescriptor": "requireSendable(FetchDescriptor<Recipe>.self)",
    "FetchDescriptor/init(predicate:sortBy:)":
        "let _: (Predicate<Recipe>?, [SortDescriptor<Recipe>]) -> FetchDescriptor<Recipe> = FetchDescriptor.init(predicate:sortBy:)",
    "FetchDescriptor/fetchLimit": "let _: WritableKeyPath<FetchDescriptor<Recipe>, Int?> = \\.fetchLimit",
    "FetchDescriptor/fetchOffset": "let _: WritableKeyPath<FetchDescriptor<Recipe>, Int?> = \\.fetchOffset",
    "FetchDescriptor/includePendingChanges": "let _: WritableKeyPath<FetchDescriptor<Recipe>, Bool> = \\.includePendingChanges",
    "FetchDescriptor/predicate": "let _: WritableKeyPath<FetchDescriptor<Recipe>, Predicate<Recipe>?> = \\.predicate",
    "FetchDescriptor/sortBy": "let _: WritableKeyPath<FetchDescriptor<Recipe>, [SortDescriptor<Recipe>]> = \\.sortBy",
    "FetchDescriptor/propertiesToFetch":
        "let _: WritableKeyPath<FetchDescriptor<Recipe>, [PartialKeyPath<Recipe>]> = \\.propertiesToFetch",
    "FetchDescriptor/relationshipKeyPathsForPrefetching":
        "let _: WritableKeyPath<FetchDescriptor<Recipe>, [PartialKeyPath<Recipe>]> = \\.relationshipKeyPathsForPrefetching",
    "FetchResultsCollection": "requireRandomAccess(FetchResultsCollection<Recipe>.self)",
    # Identity
    "PersistentIdentifier": "requireSendable(PersistentIdentifier.self); requireCodable(PersistentIdentifier.self); "
                            "requireComparable(PersistentIdentifier.self)",
    "PersistentIdentifier/ID-swift.struct": "requireSendable(PersistentIdentifier.ID.self); requireHashable(PersistentIdentifier.ID.self)",
    "PersistentIdentifier/entityName": "let _: KeyPath<PersistentIdentifier, String> = \\.entityName",
    "PersistentIdentifier/id-swift.property": "let _: KeyPath<PersistentIdentifier, PersistentIdentifier.ID> = \\.id",
    "PersistentIdentifier/storeIdentifier": "let _: KeyPath<PersistentIdentifier, String?> = \\.storeIdentifier",
    "PersistentModel": "requireSendableMetatype(Recipe.self); requireHashable(Recipe.self); requireObservable(Recipe.self)",
    "PersistentModel/isDeleted": "let _: KeyPath<Recipe, Bool> = \\.isDeleted",
    "PersistentModel/modelContext": "let _: KeyPath<Recipe, ModelContext?> = \\.modelContext",
    "PersistentModel/persistentModelID": "let _: KeyPath<Recipe, PersistentIdentifier> = \\.persistentModelID",
    "PersistentModel/schemaMetadata": "let _: [Schema.PropertyMetadata] = Recipe.schemaMetadata",
    # Actors and executors
    "ModelActor": "_ = CensusActor.self as any ModelActor.Type",
    "ModelActor/modelContainer": "_ = CensusActor.self",
    "ModelActor/modelContext": "_ = CensusActor.self",
    "ModelActor/modelExecutor": "_ = CensusActor.self",
    "ModelActor/subscript(_:as:)": "_ = CensusActor.self",
    "ModelActor/unownedExecutor": "_ = CensusActor.self",
    "ModelExecutor": "requireSendable((any ModelExecutor).self)",
    "ModelExecutor/modelContext": "let _: (any ModelExecutor) -> ModelContext = { $0.modelContext }",
    "SerialModelExecutor": "let _: (any SerialModelExecutor) -> UnownedSerialExecutor = { $0.asUnownedSerialExecutor() }",
    "DefaultSerialModelExecutor": "requireSendable(DefaultSerialModelExecutor.self); "
                                  "let _: (DefaultSerialModelExecutor) -> any SerialModelExecutor = { $0 }",
    "DefaultSerialModelExecutor/init(modelContext:)":
        "let _: (ModelContext) -> DefaultSerialModelExecutor = DefaultSerialModelExecutor.init(modelContext:)",
    # Errors
    "SwiftDataError": "requireSendable(SwiftDataError.self); requireHashable(SwiftDataError.self); let _: any Error = "
                      "SwiftDataError.loadIssueModelContainer",
    "SwiftDataError/~=(_:_:)": "let _: (SwiftDataError, any Error) -> Bool = (~=)",
    # Schema
    "Schema": "requireSendable(Schema.self)",
    "Schema/entities": "let _: KeyPath<Schema, [Schema.Entity]> = \\.entities",
    "Schema/entitiesByName": "let _: [String: Schema.Entity] = container.schema.entitiesByName",
    "Schema/init(versionedSchema:)": "let _: (any VersionedSchema.Type) -> Schema = Schema.init(versionedSchema:)",
    "Schema/version-swift.property": "let _: KeyPath<Schema, Schema.Version> = \\.version",
    "Schema/Version-swift.struct": "requireSendable(Schema.Version.self); requireCodable(Schema.Version.self); "
                                   "requireComparable(Schema.Version.self)",
    "Schema/Version-swift.struct/description": "let _: KeyPath<Schema.Version, String> = \\.description",
    "Schema/Version-swift.struct/init(_:_:_:)": "let _: (Int, Int, Int) -> Schema.Version = Schema.Version.init(_:_:_:)",
    "Schema/Version-swift.struct/major": "let _: KeyPath<Schema.Version, Int> = \\.major",
    "Schema/Entity": "requireHashable(Schema.Entity.self); requireSendable(Schema.Entity.self)",
    "Schema/Entity/name": "let _: KeyPath<Schema.Entity, String> = \\.name",
    "Schema/Entity/attributesByName": "let _: KeyPath<Schema.Entity, [String: Schema.Attribute]> = \\.attributesByName",
    "Schema/Entity/relationshipsByName":
        "let _: KeyPath<Schema.Entity, [String: Schema.Relationship]> = \\.relationshipsByName",
    "Schema/Entity/superentity": "let _: KeyPath<Schema.Entity, Schema.Entity?> = \\.superentity",
    "Schema/Entity/subentities": "let _: KeyPath<Schema.Entity, Set<Schema.Entity>> = \\.subentities",
    "Schema/Entity/uniquenessConstraints": "let _: KeyPath<Schema.Entity, [[String]]> = \\.uniquenessConstraints",
    "Schema/Entity/indices": "let _: KeyPath<Schema.Entity, [[String]]> = \\.indices",
    "Schema/PropertyMetadata": "_ = Schema.PropertyMetadata.self",
    "Schema/Attribute": "_ = Schema.Attribute.self",
    "Schema/Attribute/Option": "requireHashable(Schema.Attribute.Option.self); requireSendable(Schema.Attribute.Option.self)",
    "Schema/Attribute/Option/allowsCloudEncryption": "let _: Schema.Attribute.Option = .allowsCloudEncryption",
    "Schema/Attribute/Option/ephemeral": "let _: Schema.Attribute.Option = .ephemeral",
    "Schema/Attribute/Option/externalStorage": "let _: Schema.Attribute.Option = .externalStorage",
    "Schema/Attribute/Option/preserveValueOnDeletion": "let _: Schema.Attribute.Option = .preserveValueOnDeletion",
    "Schema/Attribute/Option/spotlight": "let _: Schema.Attribute.Option = .spotlight",
    "Schema/Attribute/Option/unique": "let _: Schema.Attribute.Option = .unique",
    "Schema/Attribute/Option/transformable(by:)-9d4xh":
        "let _: (ValueTransformer.Type) -> Schema.Attribute.Option = Schema.Attribute.Option.transformable(by:)",
    "Schema/Attribute/Option/transformable(by:)-lunz":
        "let _: (String) -> Schema.Attribute.Option = Schema.Attribute.Option.transformable(by:)",
    "Schema/Attribute/defaultValue": "let _: KeyPath<Schema.Attribute, Any?> = \\.defaultValue",
    "Schema/Attribute/isTransformable": "let _: KeyPath<Schema.Attribute, Bool> = \\.isTransformable",
    "Schema/Attribute/init(_:originalName:hashModifier:)":
        "let _: Schema.Attribute = Schema.Attribute(.unique, .spotlight, originalName: nil, hashModifier: nil)",
    "Schema/Relationship": "_ = Schema.Relationship.self",
    "Schema/Relationship/DeleteRule-swift.enum/cascade": "let _: Schema.Relationship.DeleteRule = .cascade",
    "Schema/Relationship/DeleteRule-swift.enum/deny": "let _: Schema.Relationship.DeleteRule = .deny",
    "Schema/Relationship/DeleteRule-swift.enum/noAction": "let _: Schema.Relationship.DeleteRule = .noAction",
    "Schema/Relationship/DeleteRule-swift.enum/nullify": "let _: Schema.Relationship.DeleteRule = .nullify",
    "Schema/Relationship/Option": "requireHashable(Schema.Relationship.Option.self)",
    "Schema/Relationship/deleteRule-swift.property":
        "let _: KeyPath<Schema.Relationship, Schema.Relationship.DeleteRule> = \\.deleteRule",
    "Schema/Relationship/hashModifier": "let _: KeyPath<Schema.Relationship, String?> = \\.hashModifier",
    "Schema/Relationship/isToOneRelationship": "let _: KeyPath<Schema.Relationship, Bool> = \\.isToOneRelationship",
    "Schema/Relationship/minimumModelCount": "let _: KeyPath<Schema.Relationship, Int?> = \\.minimumModelCount",
    "Schema/Relationship/options": "let _: KeyPath<Schema.Relationship, [Schema.Relationship.Option]> = \\.options",
    "Schema/Relationship/init(_:deleteRule:minimumModelCount:maximumModelCount:originalName:inverse:hashModifier:)":
        "_ = Schema.Relationship(deleteRule: .deny, minimumModelCount: 1, maximumModelCount: 3)",
    # Migration
    "VersionedSchema": "requireVersionedSchema(InventoryV1.self)",
    "VersionedSchema/models": "let _: [any PersistentModel.Type] = InventoryV1.models",
    "VersionedSchema/versionIdentifier": "let _: Schema.Version = InventoryV1.versionIdentifier",
    "SchemaMigrationPlan": "requireMigrationPlan(InventoryPlan.self)",
    "SchemaMigrationPlan/schemas": "let _: [any VersionedSchema.Type] = InventoryPlan.schemas",
    "SchemaMigrationPlan/stages": "let _: [MigrationStage] = InventoryPlan.stages",
    "MigrationStage": "_ = MigrationStage.self",
    "MigrationStage/lightweight(fromVersion:toVersion:)":
        "let _: (any VersionedSchema.Type, any VersionedSchema.Type) -> MigrationStage = MigrationStage.lightweight(fromVersion:toVersion:)",
    "MigrationStage/custom(fromVersion:toVersion:willMigrate:didMigrate:)":
        "let _: MigrationStage = .custom(fromVersion: InventoryV1.self, toVersion: InventoryV2.self, "
        "willMigrate: { (_: ModelContext) throws in }, didMigrate: nil)",
    # History
    "HistoryDescriptor": "_ = HistoryDescriptor<DefaultHistoryTransaction>.self",
    "HistoryDescriptor/init(predicate:)":
        "_ = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate<DefaultHistoryTransaction> { _ in true })",
    "HistoryDescriptor/init(predicate:sortBy:)":
        "let _: (Predicate<DefaultHistoryTransaction>?, [SortDescriptor<DefaultHistoryTransaction>]) -> "
        "HistoryDescriptor<DefaultHistoryTransaction> = HistoryDescriptor.init(predicate:sortBy:)",
    "HistoryDescriptor/predicate":
        "let _: WritableKeyPath<HistoryDescriptor<DefaultHistoryTransaction>, Predicate<DefaultHistoryTransaction>?> = \\.predicate",
    "HistoryDescriptor/sortBy":
        "let _: WritableKeyPath<HistoryDescriptor<DefaultHistoryTransaction>, [SortDescriptor<DefaultHistoryTransaction>]> = \\.sortBy",
    "HistoryTransaction": "requireHistoryTransaction(DefaultHistoryTransaction.self)",
    "HistoryTransaction/changes": "let _: KeyPath<DefaultHistoryTransaction, [HistoryChange]> = \\.changes",
    "HistoryTransaction/timestamp": "let _: KeyPath<DefaultHistoryTransaction, Date> = \\.timestamp",
    "HistoryTransaction/token": "let _: KeyPath<DefaultHistoryTransaction, DefaultHistoryToken> = \\.token",
    "HistoryTransaction/author": "let _: KeyPath<DefaultHistoryTransaction, String?> = \\.author",
    "HistoryTransaction/storeIdentifier": "let _: KeyPath<DefaultHistoryTransaction, String> = \\.storeIdentifier",
    "HistoryTransaction/transactionIdentifier-swift.property":
        "let _: KeyPath<DefaultHistoryTransaction, Int64> = \\.transactionIdentifier",
    "DefaultHistoryTransaction": "requireSendable(DefaultHistoryTransaction.self)",
    "DefaultHistoryTransaction/bundleIdentifier": "let _: KeyPath<DefaultHistoryTransaction, String> = \\.bundleIdentifier",
    "DefaultHistoryToken": "requireSendable(DefaultHistoryToken.self); requireCodable(DefaultHistoryToken.self); "
                           "requireComparable(DefaultHistoryToken.self)",
    "HistoryToken": "requireHistoryToken(DefaultHistoryToken.self)",
    "HistoryChange": "requireSendable(HistoryChange.self)",
    "HistoryChange/changedPersistentIdentifier": "let _: KeyPath<HistoryChange, PersistentIdentifier> = \\.changedPersistentIdentifier",
    "HistoryChange/insert(_:)": "let _: (any HistoryInsert) -> HistoryChange = HistoryChange.insert",
    "HistoryChange/update(_:)": "let _: (any HistoryUpdate) -> HistoryChange = HistoryChange.update",
    "HistoryChange/delete(_:)": "let _: (any HistoryDelete) -> HistoryChange = HistoryChange.delete",
    "DefaultHistoryInsert": "let _: (DefaultHistoryInsert<Recipe>) -> any HistoryInsert<Recipe> = { $0 }",
    "DefaultHistoryUpdate": "let _: (DefaultHistoryUpdate<Recipe>) -> any HistoryUpdate<Recipe> = { $0 }",
    "DefaultHistoryDelete": "let _: (DefaultHistoryDelete<Recipe>) -> any HistoryDelete<Recipe> = { $0 }",
    "HistoryDelete/tombstone": "let _: KeyPath<DefaultHistoryDelete<Recipe>, HistoryTombstone<Recipe>> = \\.tombstone",
    "HistoryDelete/changeIdentifier-swift.property": "let _: KeyPath<DefaultHistoryDelete<Recipe>, Int64> = \\.changeIdentifier",
    "HistoryDelete/transactionIdentifier-swift.property":
        "let _: KeyPath<DefaultHistoryDelete<Recipe>, Int64> = \\.transactionIdentifier",
    "HistoryTombstone": "requireSendable(HistoryTombstone<Recipe>.self)",
    "EditingState": "requireSendable(EditingState.self); let _: KeyPath<EditingState, UUID> = \\.id",
    "EditingState/author": "let _: WritableKeyPath<EditingState, String?> = \\.author",
}

# Symbols not provided, by reason (the Differences article explains each).
REASONS = {
    "swiftui": "SwiftUI does not exist on Linux (view modifiers, environment); `@Query` is provided, see Live results",
    "datastore": "custom data stores (iOS 18 DataStore API): Strata is the store; no plug-in store API",
    "backing-data": "the storage `@Model` generates differs: Strata's macro generates record hooks, not BackingData",
    "ios27": "iOS 27, after the range this census covers (iOS 17 to 26)",
    "schema-builder": "building schemas by hand from Entity/Attribute values; Strata builds schemas from @Model types",
    "differs": "provided with a different signature; see the note",
}

NOTES = {
    "ModelContainer/init(for:configurations:)-621ei": ("datastore", "takes DataStoreConfiguration values"),
    "ModelContainer/init(for:configurations:)-93ifi": ("datastore", "takes DataStoreConfiguration values"),
    "Schema/Entity/properties": ("differs", "[Schema.Property] (a class), not [any SchemaProperty]"),
    "Schema/Entity/storedProperties": ("differs", "[Schema.Property], not [any SchemaProperty]"),
    "Schema/Entity/inheritedProperties": ("differs", "[Schema.Property], get-only"),
    "Schema/Entity/inheritedPropertiesByName": ("differs", "[String: Schema.Property]"),
    "Schema/Entity/attributes": ("differs", "an array in declaration order, not a Set"),
    "Schema/Entity/relationships": ("differs", "an array in declaration order, not a Set"),
    "Schema/Relationship/keypath": ("differs", "AnyKeyPath (not optional)"),
    "Schema/PropertyMetadata/init(name:keypath:defaultValue:metadata:)": ("differs", "metadata is Any?"),
    "Schema/init(_:version:)-8el78": ("schema-builder", "from Entity values"),
    "HistoryDescriptor/fetchLimit": ("differs", "Int?, not UInt64"),
    "PersistentIdentifier/identifier(for:entityName:primaryKey:)": ("datastore", "for custom stores' identifiers"),
    "Index(_:)-7d4z0": ("differs", "R-tree indexes (Schema.Index.Types) are not supported; binary indexes are"),
    "HistoryProviding": ("datastore", "the history protocol of custom stores"),
    "HistoryProviding/HistoryType-swift.associatedtype": ("datastore", ""),
    "HistoryProviding/deleteHistory(_:)": ("datastore", ""),
    "HistoryProviding/fetchHistory(_:)": ("datastore", ""),
    "HistoryProviding/historyType-swift.type.property": ("datastore", ""),
    "Query/modelContext": ("differs", "ModelContext?: nil when QueryEnvironment has no context"),
    "HistoryDelete": ("differs", "not Sendable (its tombstone holds Any values)"),
    "HistoryUpdate": ("differs", "not Sendable"),
    "HistoryDelete/TransactionIdentifier-swift.associatedtype": ("differs", "Int64 in every Strata change"),
    "HistoryUpdate/ChangeIdentifier-swift.associatedtype": ("differs", "Int64 in every Strata change"),
    "HistoryUpdate/updatedAttributes": ("differs", "[PartialKeyPath<Model>] (no Sendable key paths)"),
    "HistoryInsert/Model": ("provided-note", ""),
    "HistoryTransaction/TokenType": ("provided-note", ""),
    "HistoryTombstone/subscript(_:)": ("differs", "subscript<Value>(_: KeyPath<Model, Value>) -> Value?"),
    "RelationshipCollection": ("backing-data", "SwiftData's internal protocol for to-many storage"),
    "RelationshipCollection/PersistentElement": ("backing-data", ""),
    "Schema/CompositeAttribute": ("schema-builder", "Codable struct attributes are stored whole"),
    "Schema/CompositeAttribute/init(name:originalName:options:valueType:defaultValue:hashModifier:)": ("schema-builder", ""),
    "Schema/CompositeAttribute/properties": ("schema-builder", ""),
    "Schema/Entity/init(_:properties:)": ("schema-builder", ""),
    "Schema/Entity/init(_:subentities:properties:)": ("schema-builder", ""),
    "Schema/Index": ("schema-builder", "#Index declares indexes"),
    "Schema/Index/CodingKeys": ("schema-builder", ""),
    "Schema/Index/CodingKeys/indices": ("schema-builder", ""),
    "Schema/Index/Types": ("schema-builder", ""),
    "Schema/Index/Types/rtree(_:)": ("schema-builder", "R-tree indexes"),
    "Schema/Index/indices": ("schema-builder", ""),
    "Schema/Index/init(_:)-4i37e": ("schema-builder", ""),
    "Schema/Index/init(_:)-527in": ("schema-builder", ""),
    "Schema/Unique": ("schema-builder", "#Unique declares constraints"),
    "Schema/Unique/CodingKeys": ("schema-builder", ""),
    "Schema/Unique/CodingKeys/constraints": ("schema-builder", ""),
    "Schema/Unique/constraints": ("schema-builder", ""),
    "SchemaProperty": ("schema-builder", "Strata's properties are Schema.Property subclasses"),
    "SchemaProperty/isOptional": ("schema-builder", "Schema.Property.isOptional"),
    "SchemaProperty/isUnique": ("schema-builder", "Schema.Attribute.isUnique"),
    "SchemaProperty/name": ("schema-builder", "Schema.Property.name (get-only)"),
}

BACKING_PREFIXES = ("BackingData", "PersistentModel/createBackingData", "PersistentModel/getValue",
                    "PersistentModel/init(backingData:)", "PersistentModel/persistentBackingData",
                    "PersistentModel/setValue")
DATASTORE_PREFIXES = ("DataStore", "DefaultStore", "DefaultSnapshot")
SWIFTUI_PREFIXES = ("SwiftUI:",)


def derived_check(path, declaration):
    """A check derived from the declaration, for the regular shapes."""
    match = re.fullmatch(r"static let (\w+): SwiftDataError", declaration)
    if match and path.startswith("SwiftDataError/"):
        return f"let _: SwiftDataError = SwiftDataError.{match.group(1)}"
    return None


def status_of(path, introduced):
    if path in CHECKS:
        return "provided", ""
    if path in NOTES:
        reason, note = NOTES[path]
        if reason == "provided-note":
            return "provided", "an associated type, checked through its conforming types"
        return reason, note
    if introduced.startswith("27"):
        return "ios27", ""
    if path.startswith(BACKING_PREFIXES):
        return "backing-data", ""
    if path.startswith(DATASTORE_PREFIXES):
        return "datastore", ""
    if path.startswith(SWIFTUI_PREFIXES):
        return "swiftui", ""
    return None, ""


def main():
    rows = []
    with open(os.path.join(HERE, "swiftdata-symbols.tsv"), newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            rows.append((row["path"], row["kind"], row["introduced"], row["declaration"], "documentation"))
    known = {r[0] for r in rows}
    for path, kind, introduced, declaration in LINKED:
        if path not in known:
            rows.append((path, kind, introduced, declaration, "topics"))
    rows.sort(key=lambda r: r[0])
    missing = []
    table = []
    checks = []
    for path, kind, introduced, declaration, source in rows:
        if path not in CHECKS and not introduced.startswith("27"):
            derived = derived_check(path, declaration)
            if derived:
                CHECKS[path] = derived
        status, note = status_of(path, introduced)
        if status is None:
            missing.append(path)
            continue
        table.append((path, kind, introduced, declaration, source, status, note))
        if path in CHECKS:
            checks.append((path, CHECKS[path]))
    unknown = sorted(set(CHECKS) - {r[0] for r in rows})
    if missing or unknown:
        for path in missing:
            print(f"no status: {path}", file=sys.stderr)
        for path in unknown:
            print(f"check for a symbol not in the census: {path}", file=sys.stderr)
        sys.exit(1)

    with open(os.path.join(HERE, "surface-status.tsv"), "w", newline="") as f:
        f.write("path\tkind\tintroduced\tdeclaration\tsource\tstatus\tnote\n")
        for row in table:
            f.write("\t".join(row) + "\n")

    counts = {}
    for row in table:
        counts[row[5]] = counts.get(row[5], 0) + 1
    in_range = [r for r in table if not r[2].startswith("27")]
    provided = sum(1 for r in in_range if r[5] == "provided")

    lines = [
        "// swift-format-ignore-file",
        "// Generated by Tests/Census/surface.py from the census of SwiftData's",
        "// documented surface (Tests/Census/surface-status.tsv). Do not edit:",
        "// change the script and run `python3 Tests/Census/surface.py`.",
        "//",
        "// Each statement uses one symbol Strata provides, with SwiftData's",
        "// signature. The file only has to compile, in every language setting",
        "// the fidelity suites run in; the test checks the count.",
        "import FidelitySupport",
        "import Foundation",
        "import Strata",
        "import XCTest",
        "",
        f"/// {len(checks)} symbols of {len(table)} in the census; {provided} of the",
        f"/// {len(in_range)} from iOS 17 to 26.",
        "nonisolated let surfaceCensusCheckCount = %d" % len(checks),
        "",
        "nonisolated func surfaceCensusChecks(container: ModelContainer, context: ModelContext, recipe: Recipe) throws -> Int {",
        "    var checked = 0",
    ]
    for path, check in checks:
        lines.append(f"    // {path}")
        for statement in check.split("; "):
            lines.append(f"    {statement}")
        lines.append("    checked += 1")
    lines += [
        "    return checked",
        "}",
        "",
        "nonisolated final class SurfaceCensusTests: FidelityTestCase {",
        "    func testEverySymbolStrataProvidesCompilesWithSwiftDatasSignature() throws {",
        "        let container = try container(Recipe.self, Ingredient.self)",
        "        let context = ModelContext(container)",
        "        let recipe = Recipe(name: \"census\")",
        "        context.insert(recipe)",
        "        XCTAssertEqual(try surfaceCensusChecks(container: container, context: context, recipe: recipe), "
        "surfaceCensusCheckCount)",
        "    }",
        "}",
        "",
    ]
    with open(os.path.join(ROOT, "Tests", "FidelityTests", "SurfaceCensus.swift"), "w") as f:
        f.write("\n".join(lines))

    article = [
        "# SwiftData's surface in Strata",
        "",
        "Every symbol of SwiftData's documentation, and whether Strata provides it.",
        "",
        "## Overview",
        "",
        f"A census of Apple's SwiftData symbol pages (iOS 17 to iOS 26, and the iOS 27 pages the",
        f"documentation already shows) lists {len(table)} symbols. Strata provides {counts.get('provided', 0)};",
        "each is used with SwiftData's signature by a test that compiles in Swift 5 and Swift 6, with and without",
        "default main-actor isolation (`Tests/FidelityTests/SurfaceCensus.swift`, generated by",
        "`python3 Tests/Census/surface.py` from `Tests/Census/surface-status.tsv`). The others, by reason:",
        "",
    ]
    for reason, text in REASONS.items():
        names = [r for r in table if r[5] == reason]
        if not names:
            continue
        article.append(f"### {reason} ({len(names)})")
        article.append("")
        article.append(text[0].upper() + text[1:] + ".")
        article.append("")
        for r in names:
            note = f": {r[6]}" if r[6] else ""
            article.append(f"- `{r[0]}`{note}")
        article.append("")
    with open(os.path.join(ROOT, "Sources", "Strata", "Strata.docc", "SwiftDataSurface.md"), "w") as f:
        f.write("\n".join(article))

    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"{len(table)} symbols: {summary}; iOS 17-26: {provided} of {len(in_range)} provided")


if __name__ == "__main__":
    main()
