"""Shopping and dining connectors and the pure logic of their capabilities: searches, de-duplication
across restaurant sources, the composite ranking formula, preference-driven criteria, and sources
that fail being retried and then reported."""

from __future__ import annotations

import math
from typing import Any

import pytest

from capabilities.dining import criteria as dining_criteria
from capabilities.dining import tools as dining_tools
from capabilities.dining.connectors import (
    CITIES,
    PLACES,
    SAMPLE_CITY,
    DiningQuery,
    RestaurantListing,
    distance_km,
    merge_listings,
    name_tokens,
    same_restaurant,
    sample_sources,
    similar_names,
)
from capabilities.dining.criteria import GoalCriteria, plan_criteria, read_goal
from capabilities.dining.ranking import apply_filters, availability, composite, price_fit, rank
from capabilities.dining.stages import Planned
from capabilities.shopping.connectors import SELLERS, SamplePriceComparison, find_seller
from capabilities.shopping.query import ProductQuery, choose_options, constraints
from capabilities.shopping.query import read_goal as read_shopping_goal
from missions.core.capability import registry as registry
from missions.core.capability.connectors import ConnectorError, ConnectorRejected, call_source, with_simulated_failures
from missions.core.capability.registry import Ctx
from missions.core.capability.tools import ToolExecutor
from missions.core.mission.envelope import Bounds, Counters
from tests.support.stages import stage_functions

WEEKNIGHT_ITALIAN = DiningQuery(cuisine="italian", day="tuesday", time="19:30", party_size=2, radius_km=5)


def all_listings(query: DiningQuery) -> list[RestaurantListing]:
    return [listing for source in sample_sources().values() for listing in source.search(query)]


# =========================================================================== shopping connector


def test_price_comparison_lists_every_sellers_offer_for_the_product_cheapest_first() -> None:
    # Given the bundled price-comparison service
    service = SamplePriceComparison()
    # When asked for a product by name
    offers = service.search("Sony WH-1000XM5 headphones")
    # Then it returns one offer per seller for that one product, cheapest total (price + shipping) first
    assert {offer.product_id for offer in offers} == {"sony-wh1000xm5"}
    assert len({offer.seller for offer in offers}) == len(offers) >= 5
    assert [offer.total for offer in offers] == sorted(offer.total for offer in offers)
    assert all(math.isclose(o.total, o.price + o.shipping_cost) for o in offers)
    # And both trusted retailers and marketplace sellers are among them, with ratings and delivery times
    assert {o.trusted for o in offers} == {True, False}
    assert all(0 < o.rating <= 5 and o.shipping_days >= 1 for o in offers)
    # And the same question gives the same answer (the sample data is deterministic)
    assert service.search("Sony WH-1000XM5 headphones") == offers


@pytest.mark.parametrize(
    ("query", "product"),
    [
        ("kindle", "kindle-paperwhite"),
        ("Apple iPhone 15 Pro", "iphone-15-pro-128"),
        ("a coffee machine", "nespresso-vertuo-next"),
        ("logitech mx master 3s mouse", "logitech-mx-master-3s"),
    ],
)
def test_price_comparison_matches_names_and_aliases(query: str, product: str) -> None:
    assert {o.product_id for o in SamplePriceComparison().search(query)} == {product}


def test_price_comparison_finds_nothing_for_an_unknown_product_and_refuses_an_empty_query() -> None:
    assert SamplePriceComparison().search("a tandem bicycle") == []
    with pytest.raises(ConnectorRejected):
        SamplePriceComparison().search("   ")


@pytest.mark.parametrize(("text", "seller"), [("Best Buy", "bestbuy"), ("bestbuy", "bestbuy"), ("B&H", "bh")])
def test_sellers_are_found_by_how_people_write_them(text: str, seller: str) -> None:
    found = find_seller(text)
    assert found is not None and found.id == seller and found is SELLERS[seller]
    assert find_seller("some corner shop") is None


# =========================================================================== shopping: reading and filtering


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        ("Find best price for Sony WH-1000XM5 headphones", {"product": "Sony WH-1000XM5 headphones"}),
        (
            "Find the best price for an iPhone 15 Pro under $950 from a trusted store",
            {"product": "iPhone 15 Pro", "max_price": 950.0, "trusted_only": True},
        ),
        ("buy a kindle paperwhite delivered within 3 days", {"product": "kindle paperwhite", "max_shipping_days": 3}),
        ("Cheapest Nespresso Vertuo, refurbished is fine", {"product": "Nespresso Vertuo", "condition": "any"}),
    ],
)
def test_the_offline_reading_of_a_shopping_goal(goal: str, expected: dict[str, Any]) -> None:
    query = read_shopping_goal(goal)
    assert {key: getattr(query, key) for key in expected} == expected


def test_stored_preferences_filter_the_offers_and_say_how() -> None:
    # Given the headphones' offers and a user who trusts verified retailers only, dislikes Walmart, likes Best Buy
    offers = SamplePriceComparison().search("Sony WH-1000XM5")
    preferences = {"trusted_retailers_only": True, "dislikes": ["Walmart"], "likes": ["Best Buy"], "budget": 380}
    # When the filter is built and applied
    rules, applied = constraints(ProductQuery(product="Sony WH-1000XM5"), preferences)
    kept, removed = choose_options(offers, rules)
    # Then only trusted, in-stock, new offers within budget from sellers not disliked remain, cheapest first
    assert [o.seller for o in kept] == ["bh", "amazon", "bestbuy"]
    assert removed == {"not_trusted": 2, "out_of_stock": 1, "disliked_seller": 1}  # each offer counts once
    # And every preference that shaped the filter is reported
    assert [line.split(":")[0] for line in applied] == ["trusted_retailers_only", "dislikes", "likes", "budget"]


def test_the_goals_own_constraints_apply_and_the_stricter_budget_wins() -> None:
    offers = SamplePriceComparison().search("Sony WH-1000XM5")
    rules, _ = constraints(ProductQuery(product="x", max_price=360, max_shipping_days=4), {"budget": "400"})
    kept, removed = choose_options(offers, rules)
    assert rules["max_price"] == 360 and [o.seller for o in kept] == ["bh", "amazon"]
    assert removed == {"ships_too_slowly": 1, "over_budget": 2, "not_new": 1, "out_of_stock": 1}


# =========================================================================== dining sources


def test_three_sources_list_overlapping_restaurants_under_their_own_ids_and_names() -> None:
    # When every source is asked the same question
    by_source = {name: source.search(WEEKNIGHT_ITALIAN) for name, source in sample_sources().items()}
    # Then each answers, with its own ids
    assert set(by_source) == {"maps", "reviews", "reservations"}
    for name, listings in by_source.items():
        assert listings and all(listing.source == name for listing in listings)
        assert len({listing.source_id for listing in listings}) == len(listings)
    ids = [{listing.source_id for listing in listings} for listings in by_source.values()]
    assert not (ids[0] & ids[1]) and not (ids[1] & ids[2])
    # And the same restaurant appears in several of them under slightly different names
    names = {listing.name for listings in by_source.values() for listing in listings}
    assert {"Trattoria Bella", "Trattoria Bella Ristorante", "TRATTORIA BELLA"} <= names
    # And each source knows different things: ratings and diets (reviews), free tables (reservations)
    assert all(listing.review_count for listing in by_source["reviews"])
    assert all(listing.bookable and listing.rating is None for listing in by_source["reservations"])
    assert all(listing.price_level and listing.phone for listing in by_source["maps"])


def test_sources_filter_by_cuisine_and_distance() -> None:
    near = all_listings(DiningQuery(cuisine="italian", radius_km=1.0))
    assert near and all("italian" in listing.cuisines and listing.distance_km <= 1.0 for listing in near)
    assert all("thai" in listing.cuisines for listing in all_listings(DiningQuery(cuisine="thai", radius_km=10)))


def test_reservations_offer_tables_near_the_asked_time_for_the_party_and_the_day() -> None:
    reservations = sample_sources()["reservations"]
    tuesday = {r.name: r.slots for r in reservations.search(WEEKNIGHT_ITALIAN)}
    friday = {r.name: r.slots for r in reservations.search(DiningQuery(cuisine="italian", day="friday"))}
    crowd = reservations.search(DiningQuery(cuisine="italian", day="tuesday", party_size=12))
    assert tuesday["TRATTORIA BELLA"] == ("19:00", "19:30", "20:30")
    assert friday["TRATTORIA BELLA"] == ()  # booked out around 19:30 on a Friday
    assert all(abs(slot_minutes(s) - slot_minutes("19:30")) <= 90 for slots in tuesday.values() for s in slots)
    assert all(listing.slots == () for listing in crowd)  # no table for 12 anywhere


def slot_minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


@pytest.mark.parametrize(
    "query",
    [DiningQuery(time="7pm"), DiningQuery(party_size=0), DiningQuery(radius_km=0)],
    ids=["time-not-hhmm", "empty-party", "no-radius"],
)
def test_a_bad_query_is_rejected_not_retried(query: DiningQuery) -> None:
    with pytest.raises(ConnectorRejected):
        sample_sources()["maps"].search(query)


# =========================================================================== de-duplication


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Trattoria Bella", "Trattoria Bella Ristorante", True),
        ("Trattoria Bella", "TRATTORIA BELLA", True),
        ("Pizzeria Napoli", "Napoli Pizzeria", True),
        ("Pizzeria Napoli", "Pizzeria Napoli & Bar", True),
        ("Nonna's Table", "Nonnas Table", True),
        ("Bistro Lumière", "Bistro Lumiere", True),
        ("Thai Orchid", "Orchid Thai Cuisine", True),
        ("Casa Verde", "Casa Roma", False),
        ("Taj Spice", "Taj Indian Kitchen", False),
    ],
)
def test_similar_names(a: str, b: str, same: bool) -> None:
    assert similar_names(a, b) is same
    assert name_tokens("The Osteria Roma") == name_tokens("Osteria Roma")


@pytest.mark.parametrize("city", sorted(CITIES))
def test_each_city_merges_into_one_record_per_place_and_only_its_own(city: str) -> None:
    # Given every source's listings for any cuisine within 10 km of the city's centre
    listings = all_listings(DiningQuery(radius_km=10, city=city.title()))
    # When they are merged / Then there is one record per place of that city, duplicates really merged
    merged = merge_listings(listings)
    places = [place for place in PLACES if place.city == city]
    assert len(merged) == len(places) < len(listings)
    assert {r.phone and r.phone[-4:] for r in merged} == {place.phone[-4:] for place in places}
    # And outside the sample city, each record says which neighbourhood it is in
    assert city == SAMPLE_CITY or all(r.area for r in merged)


def test_a_city_no_source_covers_is_refused_naming_those_it_covers() -> None:
    with pytest.raises(ConnectorRejected, match="no restaurants known in 'Atlantis'.*paris"):
        all_listings(DiningQuery(city="Atlantis"))


def test_merging_turns_every_sources_listing_of_a_restaurant_into_one_record() -> None:
    # Given every source's listings for any cuisine within 10 km (the whole sample city)
    listings = all_listings(DiningQuery(radius_km=10))
    # When they are merged
    merged = merge_listings(listings)
    # Then there is one record per real place, and duplicates were really merged
    assert len(merged) == len([place for place in PLACES if place.city == SAMPLE_CITY]) < len(listings)
    assert len({r.id for r in merged}) == len(merged)
    by_id = {r.id: r for r in merged}
    bella = by_id["trattoria-bella"]
    assert bella.sources == ["maps", "reservations", "reviews"] and len(bella.names) == 3
    # And each record takes each field from the source that knows it
    assert bella.price_per_person == 42 and bella.price_from == "reviews"  # reviews' price beats the others'
    assert bella.review_count == 2210 and bella.rating == 4.6
    assert bella.bookable is True and "19:30" in bella.slots
    assert by_id["pizzeria-napoli"].dietary == ["vegetarian", "vegan"]
    # And every record holds at most one listing per source, all close together
    for restaurant in merged:
        assert len(restaurant.source_ids) == len(restaurant.sources)


def test_two_branches_of_one_name_stay_two_restaurants_and_one_phone_merges_different_names() -> None:
    merged = merge_listings(all_listings(DiningQuery(radius_km=10)))
    luigis = [r for r in merged if r.name == "Luigi's"]
    assert len(luigis) == 2 and len({r.id for r in luigis}) == 2
    near = min(luigis, key=lambda r: r.distance_km)
    assert near.id == "luigis" and near.sources == ["maps", "reviews"]  # the branch the reviews site lists
    taj = next(r for r in merged if r.phone and r.phone.endswith("0113"))
    assert taj.names == ["Taj Indian Kitchen", "Taj Spice"] and len(taj.sources) == 3


def test_listings_from_one_source_are_never_merged_together() -> None:
    # Given two maps listings with the same name and place (one source lists a place once)
    base = sample_sources()["maps"].search(WEEKNIGHT_ITALIAN)[0]
    twin = RestaurantListing(**{**base.__dict__, "source_id": "maps:other"})
    assert same_restaurant(base, twin)
    # Then merging keeps them apart
    assert len(merge_listings([base, twin])) == 2


def test_distance_is_haversine() -> None:
    assert distance_km((0.0, 0.0), (1.0, 0.0)) == pytest.approx(111.19, abs=0.01)


# =========================================================================== ranking


def restaurant(**fields: Any) -> dict[str, Any]:
    return {
        "id": "x",
        "name": "X",
        "distance_km": 1.0,
        "rating": 4.0,
        "price_per_person": 30.0,
        "bookable": True,
        "slots": ["19:30"],
        "dietary": [],
        **fields,
    }


CRITERIA = {
    "time": "19:30",
    "max_price_per_person": 60,
    "max_distance_km": 5,
    "dietary_required": [],
    "dietary_preferred": [],
}


def test_the_composite_score_weighs_rating_04_availability_03_price_fit_03() -> None:
    # Given a 4.5-star place with a table 30 minutes off the asked time, at half the price ceiling
    place = restaurant(rating=4.5, slots=["20:00"], price_per_person=30.0)
    # When scored
    scored = composite(place, CRITERIA)
    # Then each component is on 0..1 and the score is their weighted sum
    assert scored["components"] == {"rating": 0.9, "availability": 0.75, "price_fit": 0.75}
    assert scored["score"] == pytest.approx(0.4 * 0.9 + 0.3 * 0.75 + 0.3 * 0.75)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"slots": ["19:30"]}, 1.0),
        ({"slots": ["18:00", "20:00"]}, 0.75),
        ({"slots": ["21:30"]}, 0.0),
        ({"slots": []}, 0.0),  # listed by the reservations service, no table
        ({"bookable": None, "slots": []}, 0.5),  # not on the reservations service: walk in or call
    ],
)
def test_availability(fields: dict[str, Any], expected: float) -> None:
    assert availability(restaurant(**fields), "19:30") == expected


def test_price_fit() -> None:
    assert price_fit(0.0, 60) == 1.0 and price_fit(60.0, 60) == 0.5 and price_fit(61.0, 60) == 0.0
    assert price_fit(None, 60) == 0.5


def test_ranking_is_by_score_then_distance() -> None:
    places = [
        restaurant(id="far", distance_km=3.0),
        restaurant(id="near", distance_km=1.0),
        restaurant(id="best", rating=5.0),
        restaurant(id="full", slots=[]),
    ]
    assert [r["id"] for r in rank(places, CRITERIA)] == ["best", "near", "far", "full"]


def test_filters_remove_what_the_criteria_exclude_and_relax_a_preferred_diet_with_too_few_places() -> None:
    places = [
        restaurant(id="far", distance_km=9.0),
        restaurant(id="dear", price_per_person=80.0),
        restaurant(id="veg1", dietary=["vegetarian"]),
        restaurant(id="veg2", dietary=["vegetarian", "vegan"]),
        restaurant(id="meat"),
    ]
    kept, removed, notes = apply_filters(places, {**CRITERIA, "dietary_required": ["vegetarian"]})
    assert [r["id"] for r in kept] == ["veg1", "veg2"] and removed["distance"] == removed["price"] == 1
    assert removed["dietary"] == 1 and notes == []
    # A preferred (not required) diet that only two places offer is relaxed, and said so
    kept, removed, notes = apply_filters(places, {**CRITERIA, "dietary_preferred": ["vegan"]})
    assert [r["id"] for r in kept] == ["veg1", "veg2", "meat"] and notes and "vegan" in notes[0]


# =========================================================================== dining criteria


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        (
            "Find an Italian restaurant for a weeknight dinner for 2",
            {"cuisine": "italian", "weeknight": True, "party_size": 2, "time": "19:30", "day": None},
        ),
        (
            "Table for 4 on Friday at 8pm, somewhere vegan",
            {"day": "friday", "time": "20:00", "party_size": 4, "dietary": ["vegan"], "weeknight": False},
        ),
        (
            "Thai dinner on Tuesday for three people under $30 within 2 km",
            {"cuisine": "thai", "weeknight": True, "party_size": 3, "max_price_per_person": 30.0},
        ),
        ("gluten free lunch", {"time": "12:30", "dietary": ["gluten-free"]}),
    ],
)
def test_the_offline_reading_of_a_dining_goal(goal: str, expected: dict[str, Any]) -> None:
    criteria = read_goal(goal)
    assert {key: getattr(criteria, key) for key in expected} == expected


def test_a_weeknight_budget_preference_lowers_the_ceiling_on_weeknights_only() -> None:
    # Given the preferences the feedback "too expensive for a weeknight, more vegetarian options" leaves
    preferences = {"weeknight_budget": "lower", "likes": ["vegetarian"]}
    context = {"price_ceiling_per_person": 60}
    # When a weeknight search is planned
    weeknight, applied = plan_criteria(GoalCriteria(cuisine="italian", weeknight=True), preferences, context)
    # Then the ceiling is lower and vegetarian options preferred, and both are reported
    assert weeknight["max_price_per_person"] == 36 and weeknight["dietary_preferred"] == ["vegetarian"]
    assert len(applied) == 2 and "weeknight_budget" in applied[0]
    # And a Friday search keeps the usual ceiling (the preference is about weeknights)
    friday, _ = plan_criteria(GoalCriteria(cuisine="italian", day="friday"), preferences, context)
    assert friday["max_price_per_person"] == 60 and friday["weeknight"] is False


@pytest.mark.parametrize(
    ("preferences", "ceiling"),
    [
        ({"budget": "higher"}, 90),
        ({"weeknight_budget": "lower than $50/person"}, 50),
        ({"weeknight_budget": 40}, 40),
        ({"budget": "lower", "weeknight_budget": "lower"}, 22),  # 60 x 0.6 x 0.6
        ({"weekend_budget": "higher"}, 60),  # not a weekend
    ],
)
def test_budget_preferences(preferences: dict[str, Any], ceiling: int) -> None:
    planned, _ = plan_criteria(GoalCriteria(weeknight=True), preferences, {})
    assert planned["max_price_per_person"] == ceiling


def test_dietary_restrictions_are_required_and_the_goals_limits_narrow_further() -> None:
    goal = GoalCriteria(dietary=["vegan"], max_price_per_person=25, max_distance_km=2)
    planned, _ = plan_criteria(goal, {"dietary_restrictions": ["Gluten free"], "max_distance_km": 3}, {})
    assert planned["dietary_required"] == ["vegan", "gluten-free"]
    assert planned["max_price_per_person"] == 25 and planned["max_distance_km"] == 2
    assert dining_criteria.DEFAULT_CEILING == 60


# =========================================================================== retries, then a reported failure


class SourceRun:
    """A dining source stage run on its own, as the runner would run it: its real tool executor, a
    plan's criteria, and the errors it reports."""

    def __init__(self, name: str, context: dict[str, Any], time: str = "19:30"):
        capability = registry.load("dining")
        function = stage_functions(capability)[name]
        self.tools = ToolExecutor(capability.catalog, capability.pipeline.agent(name))
        self.errors: list[tuple[str, str]] = []
        ctx = Ctx(
            stage=name,
            goal="italian dinner",
            context=context,
            answers=[],
            counters=Counters(),
            bounds=Bounds(),
            answer=None,
            think=lambda model, facts, check: pytest.fail("a source stage asks no model"),
            tools=self.tools,
            fan_out=lambda items: None,
            save_artifact=lambda path, content: None,
            repository_root=lambda: ".",
            report=lambda kind, message: self.errors.append((name, kind)),
        )
        plan = Planned.model_construct(criteria={"cuisine": "italian", "time": time, "max_distance_km": 5})
        self.output = function.func(ctx=ctx, plan=plan).model_dump()


def test_call_source_retries_a_transient_failure_and_reports_attempts() -> None:
    sleeps: list[float] = []
    flaky = with_simulated_failures({"simulate_failures": {"maps": 2}}, "maps", lambda: [1, 2])
    result = call_source("maps", flaky, sleep=sleeps.append)
    assert result.ok and result.items == [1, 2] and result.attempts == 3 and sleeps == [0.05, 0.1]


def test_a_source_that_keeps_failing_is_reported_after_its_retries() -> None:
    # Given the reviews source failing more often than it is retried
    # When its stage runs
    run = SourceRun("reviews", {"simulate_failures": {"reviews": 5}})
    output = run.output
    # Then the stage does not raise: its output reports the failure and the attempts
    assert output["listings"] == []
    assert output["report"] == {
        "source": "reviews",
        "ok": False,
        "count": 0,
        "error": "failed after 3 attempts: simulated outage",
        "attempts": 3,
    }
    # And the mission's errors record it (so the CLI and the API show it)
    assert run.errors == [("reviews", "source_failed")]


def test_a_connector_error_inside_the_tool_is_retried_and_a_rejection_is_not(monkeypatch) -> None:
    # Given a reservations service that times out twice, then answers
    calls = {"n": 0}
    real = dining_tools.SOURCES["reservations"]

    class Flaky:
        name = "reservations"

        def search(self, query: DiningQuery) -> list[RestaurantListing]:
            calls["n"] += 1
            if calls["n"] <= 2:
                raise ConnectorError("timeout")
            return real.search(query)

    monkeypatch.setitem(dining_tools.SOURCES, "reservations", Flaky())
    run = SourceRun("reservations", {})
    output = run.output
    # Then the stage retried through the tool and got the listings on the third attempt
    assert output["report"]["ok"] and output["report"]["attempts"] == 3 and output["listings"]
    assert run.tools.executed == 3

    # Given criteria the service refuses (a time that is not HH:MM)
    monkeypatch.setitem(dining_tools.SOURCES, "reservations", real)
    report = SourceRun("reservations", {}, time="late").output["report"]
    # Then it is reported at once, without retrying
    assert not report["ok"] and report["attempts"] == 1 and report["error"].startswith("rejected:")
