// What the generated SurfaceCensus.swift checks symbols with: constraints
// that fail to compile when a type lacks a conformance SwiftData's has, and
// declarations that use the macros and actor members.
import Foundation
import Observation
import Strata

nonisolated func requireSendable<T: Sendable>(_: T.Type) {}
nonisolated func requireSendableMetatype<T: SendableMetatype>(_: T.Type) {}
nonisolated func requireHashable<T: Hashable>(_: T.Type) {}
nonisolated func requireCodable<T: Codable>(_: T.Type) {}
nonisolated func requireComparable<T: Comparable>(_: T.Type) {}
nonisolated func requireObservable<T: Observable>(_: T.Type) {}
nonisolated func requireRandomAccess<T: RandomAccessCollection>(_: T.Type) where T.Index == Int {}
nonisolated func requireVersionedSchema<T: VersionedSchema>(_: T.Type) {}
nonisolated func requireMigrationPlan<T: SchemaMigrationPlan>(_: T.Type) {}
nonisolated func requireHistoryTransaction<T: HistoryTransaction>(_: T.Type) {}
nonisolated func requireHistoryToken<T: HistoryToken>(_: T.Type) {}

@Model
final class CensusShapes {
    #Unique<CensusShapes>([\.code], [\.name, \.group])
    #Index<CensusShapes>([\.name], [\.group, \.code])
    var code: String
    var name: String
    var group: Int
    @Transient var scratch = 0

    init(code: String, name: String, group: Int) {
        self.code = code
        self.name = name
        self.group = group
    }

    static let transientCheck = \CensusShapes.scratch
    static let uniqueCheck = CensusShapes.self
    static let indexCheck = CensusShapes.self

    /// The main context is main-actor isolated, as SwiftData's.
    @MainActor static func mainContextCheck(_ container: ModelContainer) -> ModelContext { container.mainContext }
}

@ModelActor
actor CensusActor {
    /// Every member SwiftData's `ModelActor` declares, from the actor.
    func membersCheck(_ id: PersistentIdentifier) -> Bool {
        let container: ModelContainer = modelContainer
        let context: ModelContext = modelContext
        let executor: any ModelExecutor = modelExecutor
        let serial: UnownedSerialExecutor = unownedExecutor
        let model: Recipe? = self[id, as: Recipe.self]
        _ = (container, context, executor, serial)
        return model != nil
    }

    /// `modelContainer` and `modelExecutor` are nonisolated.
    nonisolated func nonisolatedMembers() -> (ModelContainer, any ModelExecutor) { (modelContainer, modelExecutor) }
}

/// `@Query` in each of SwiftData's forms, held as a SwiftUI view holds
/// them (views are main-actor types).
@MainActor
struct CensusQueries {
    @Query var all: [Recipe]
    @Query(transaction: nil) var withTransaction: [Recipe]
    @Query(animation: .default) var animated: [Recipe]
    @Query(FetchDescriptor<Recipe>(), animation: .default) var described: [Recipe]
    @Query(FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)]), transaction: nil) var describedTransaction: [Recipe]
    @Query(filter: #Predicate<Recipe> { $0.isFavorite }, sort: [SortDescriptor(\Recipe.name)]) var favorites: [Recipe]
    @Query(filter: #Predicate<Recipe> { $0.isFavorite }, sort: [SortDescriptor(\Recipe.name)], animation: .default)
    var animatedFavorites: [Recipe]
    @Query(sort: \Recipe.rating, order: .reverse) var byRating: [Recipe]
    @Query(sort: \Ingredient.recipe?.name, order: .forward, transaction: nil) var byRecipe: [Ingredient]

    init() {}

    /// A view's initializer sets its query from its arguments.
    init(named name: String) {
        _all = Query(filter: #Predicate { $0.name == name }, sort: [SortDescriptor(\.name)])
    }
}
